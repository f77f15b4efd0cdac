"""PNG encoding and decoding per env and for its largest preset: ours against Pillow.

Frames are the observation images of a few episodes of every env from ``vlm_envs.list_envs()`` (the oracle's
replies where the env has one, else ``random_response``), at its defaults and at every difficulty preset it
has; the second row of each env holds only its "hard" preset (the largest sizes). Each encoder encodes every
frame ``--repeats`` times, in the same process, pinned to one core; a frame's time is its best repeat. Target:
ours >= 4x Pillow level 1 at <= 1.0x its bytes. "sent" is what every path ships (``lossless_png``): the
bytes an env attached to its frame (Sokoban's palette PNGs) where it did, else ours; "attached" counts those
frames. Decoding, of the sent bytes: Pillow's decoder against ours (``vlm_envs.imaging.decode``), as a
``RemoteEnv`` decodes a served observation.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/png_speed.py [--episodes N] [--steps N] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import time
from collections.abc import Callable
from typing import Any

from PIL import Image

from load_client import cpu_model
from vlm_envs import build_env, list_envs
from vlm_envs.envs.config import LEVELS
from vlm_envs.imaging import BACKEND, attached_png, encode_png, lossless_png
from vlm_envs.imaging.decode import decode_png
from vlm_envs.imaging.png import LEVEL

SPEEDUP_TARGET = 4.0
BYTES_TARGET = 1.0
Encoder = Callable[[Image.Image], bytes]


def pillow_decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data), formats=["PNG"])
    image.load()
    return image


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


def timed(encode: Callable[[Any], Any], inputs: list[Any], repeats: int) -> tuple[float, float]:
    """Mean over inputs of the best time in microseconds, and the mean length of what came out."""
    best, size = 0.0, 0
    for item in inputs:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = encode(item)
            times.append(time.perf_counter() - start)
        best += min(times)
        size += len(out) if isinstance(out, bytes) else 0
    return best / len(inputs) * 1e6, size / len(inputs)


def row(label: str, images: list[Image.Image], repeats: int) -> tuple[tuple[str, ...], bool]:
    sent = [lossless_png(image) for image in images]
    for image, data in zip(images, sent, strict=True):  # the property test's check, on real frames
        assert decode_png(data).convert(image.mode).tobytes() == image.tobytes(), label
        assert pillow_decode(data).convert(image.mode).tobytes() == image.tobytes(), label
    l1_us, l1_bytes = timed(pillow(1), images, repeats)
    l6_us, l6_bytes = timed(pillow(None), images, repeats)
    us, size = timed(encode_png, images, repeats)
    attached = sum(attached_png(image) is not None for image in images)
    pillow_decode_us, _ = timed(pillow_decode, sent, repeats)
    decode_us, _ = timed(decode_png, sent, repeats)
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
        f"{attached}/{len(images)}",
        f"{sum(map(len, sent)) / len(sent):,.0f}",
        f"{pillow_decode_us:,.0f}",
        f"{decode_us:,.0f}",
        f"{pillow_decode_us / decode_us:.1f}x",
    )
    return cells, met


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
        "attached",
        "sent bytes",
        "Pillow decode us",
        "ours decode us",
        "decode speedup",
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
        f"{cpu_model()} (pinned to one); best of {args.repeats} per frame. "
        f"Target: >= {SPEEDUP_TARGET:g}x Pillow level 1 at <= {BYTES_TARGET:g}x its bytes; "
        f"missed: {', '.join(missed) or 'none'}."
    )


if __name__ == "__main__":
    main()
