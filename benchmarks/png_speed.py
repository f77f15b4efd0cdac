"""PNG encoding per env and for its largest preset: ours against Pillow at level 1 and at its default.

Frames are the observation images of a few episodes of every env from ``vlm_envs.list_envs()`` (the oracle's
replies where the env has one, else ``random_response``), at its defaults and at every difficulty preset it
has; the second row of each env holds only its "hard" preset (the largest sizes). Each encoder encodes every
frame ``--repeats`` times, in the same process, pinned to one core; a frame's time is its best repeat. Target:
ours >= 4x Pillow level 1 at <= 1.0x its bytes.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/png_speed.py [--episodes N] [--steps N] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

from PIL import Image

from vlm_envs import build_env, list_envs
from vlm_envs.envs.config import LEVELS
from vlm_envs.imaging import BACKEND, encode_png, lossless_png
from vlm_envs.imaging.png import LEVEL

SPEEDUP_TARGET = 4.0
BYTES_TARGET = 1.0
Encoder = Callable[[Image.Image], bytes]


def pillow(level: int | None) -> Encoder:
    """Pillow's PNG encoder at ``level`` (``None``: its default, level 6)."""
    options = {} if level is None else {"compress_level": level}

    def encode(image: Image.Image) -> bytes:
        buf = io.BytesIO()
        image.save(buf, format="PNG", **options)
        return buf.getvalue()

    return encode


def frames(name: str, level: str | None, episodes: int, steps: int) -> list[Image.Image]:
    """Observation images of ``episodes`` short episodes of ``name`` at ``level`` (``None``: defaults)."""
    env = build_env(name, **({} if level is None else {"difficulty": level}))
    found: list[Image.Image] = []
    try:
        for seed in range(episodes):
            rng = random.Random(seed)
            obs, _ = env.reset(seed=seed)
            found += obs.images
            for _ in range(steps):
                reply = env.oracle_response() if seed % 2 == 0 else None
                obs, done, _ = env.step(reply if reply is not None else env.random_response(rng))
                found += obs.images
                if done:
                    break
    finally:
        env.close()
    return found


def levels_of(name: str) -> list[str | None]:
    """``None`` (the defaults) and every difficulty the env has a preset for."""
    found: list[str | None] = [None]
    for level in LEVELS:
        try:
            build_env(name, difficulty=level).close()
        except ValueError:
            continue
        found.append(level)
    return found


def timed(encode: Encoder, images: list[Image.Image], repeats: int) -> tuple[float, float]:
    """Mean over frames of the best time in microseconds, and mean bytes."""
    best, size = 0.0, 0
    for image in images:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            data = encode(image)
            times.append(time.perf_counter() - start)
        best += min(times)
        size += len(data)
    return best / len(images) * 1e6, size / len(images)


def row(label: str, images: list[Image.Image], repeats: int) -> tuple[tuple[str, ...], bool]:
    for image in images:  # the property test's check, on real frames
        assert Image.open(io.BytesIO(lossless_png(image))).tobytes() == image.tobytes(), label
    l1_us, l1_bytes = timed(pillow(1), images, repeats)
    l6_us, l6_bytes = timed(pillow(None), images, repeats)
    us, size = timed(encode_png, images, repeats)
    speedup, ratio = l1_us / us, size / l1_bytes
    width = sum(im.width for im in images) / len(images)
    height = sum(im.height for im in images) / len(images)
    modes = "/".join(sorted({im.mode for im in images}))
    met = speedup >= SPEEDUP_TARGET and ratio <= BYTES_TARGET
    cells = (
        label,
        str(len(images)),
        f"{width:.0f}x{height:.0f} {modes}",
        f"{l1_us:,.0f}",
        f"{l1_bytes:,.0f}",
        f"{l6_us:,.0f}",
        f"{l6_bytes:,.0f}",
        f"{us:,.0f}",
        f"{size:,.0f}",
        f"{speedup:.1f}x",
        f"{ratio:.3f}",
        "met" if met else "MISSED",
    )
    return cells, met


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []:
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per env and level (default 4)")
    parser.add_argument("--steps", type=int, default=4, help="steps per episode at most (default 4)")
    parser.add_argument("--repeats", type=int, default=5, help="timed encodings of each frame (default 5)")
    parser.add_argument("--core", type=int, default=0, help="the core to pin this process to")
    parser.add_argument("--only", nargs="*", default=None, help="these envs only")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    names = args.only or [spec.name for spec in list_envs()]
    header = (
        "env",
        "frames",
        "mean size",
        "Pillow L1 us",
        "Pillow L1 bytes",
        "Pillow L6 us",
        "Pillow L6 bytes",
        "ours us",
        "ours bytes",
        "speedup vs L1",
        "bytes vs L1",
        "target",
    )
    rows, missed = [], []
    for name in names:
        levels = levels_of(name)
        every = [im for level in levels for im in frames(name, level, args.episodes, args.steps)]
        groups = [(name, every)]
        if "hard" in levels:
            groups.append((f"{name} (hard)", frames(name, "hard", args.episodes, args.steps)))
        for label, images in groups:
            cells, met = row(label, images, args.repeats)
            rows.append(cells)
            if not met:
                missed.append(label)
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print(
        f"\nours: vlm_envs.imaging.encode_png, deflate {BACKEND} level {LEVEL}; Pillow {Image.__version__}; "
        f"{cpu_model()}, one core; best of {args.repeats} per frame. Target: >= {SPEEDUP_TARGET:g}x Pillow "
        f"level 1 at <= {BYTES_TARGET:g}x its bytes; missed: {', '.join(missed) or 'none'}."
    )


if __name__ == "__main__":
    main()
