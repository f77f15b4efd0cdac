"""The caller's CPU per step: a ``RemoteEnv`` against the same env in process, per env.

Starts ``vlm-envs serve`` (the real command, a subprocess) with every env asked for, then plays the
same episodes (seeds 0.., replies drawn in process from ``random_response``) three ways in this
process: the env in process; a ``RemoteEnv`` decoding images with ours (``vlm_envs.imaging.decode``);
and the same ``RemoteEnv`` decoding with Pillow's decoder, as it did before (the baseline, measured in
the same run, the two interleaved over ``--rounds``; each row keeps its least CPU). CPU is this
process's user+system time over the steps (``time.process_time``), not the server's; wall time per
step is shown too. Images over the wire must equal the in-process ones, mode included.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/remote_step.py [--steps N] [--only NAME ...]``.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from PIL import Image

import vlm_envs.remote_wire
from load_client import Server, cpu_model, free_port
from vlm_envs import Env, build_env, list_envs
from vlm_envs.remote import RemoteEnv


@contextmanager
def server(names: list[str]) -> Iterator[str]:
    """``vlm-envs serve NAMES`` on a free port; yields its URL once it answers."""
    served = Server(
        "vlm-envs serve", [sys.executable, "-m", "vlm_envs.cli", "serve", *names, "--port", "{port}"]
    )
    served.start(free_port())
    try:
        yield f"http://127.0.0.1:{served.port}"
    finally:
        served.stop()


def pillow_decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data), formats=["PNG"])
    image.load()
    return image


@contextmanager
def decoder(decode: Callable[[bytes], Image.Image] | None) -> Iterator[None]:
    """The client decoding wire images with ``decode`` (``None``: as shipped)."""
    shipped = vlm_envs.remote_wire.decode_png
    if decode is not None:
        vlm_envs.remote_wire.decode_png = decode  # the baseline: the client as it decoded before
    try:
        yield
    finally:
        vlm_envs.remote_wire.decode_png = shipped


def episodes(name: str, steps: int) -> list[tuple[int, list[str]]]:
    """Seeds and replies (``random_response``, drawn in process) adding up to ``steps`` steps."""
    env, rng, found, count = build_env(name), random.Random(0), [], 0
    while count < steps:
        env.reset(seed=len(found))
        replies, done = [], False
        while not done and count < steps:
            replies.append(env.random_response(rng))
            _, done, _ = env.step(replies[-1])
            count += 1
        found.append((len(found), replies))
    return found


def play(env: Env, script: list[tuple[int, list[str]]]) -> tuple[float, float, list[bytes]]:
    """CPU and wall seconds per step (resets included) over ``script``, and every image's pixels."""
    pixels: list[bytes] = []
    steps = sum(len(replies) for _, replies in script)
    cpu, wall = time.process_time(), time.perf_counter()
    for seed, replies in script:
        obs, _ = env.reset(seed=seed)
        pixels += [f"{im.mode}{im.size}".encode() + im.tobytes() for im in obs.images]
        for reply in replies:
            obs, _, _ = env.step(reply)
            pixels += [f"{im.mode}{im.size}".encode() + im.tobytes() for im in obs.images]
    return (time.process_time() - cpu) / steps, (time.perf_counter() - wall) / steps, pixels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps per env and way (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the least CPU counts")
    parser.add_argument("--only", nargs="*", default=None, help="these envs only")
    args = parser.parse_args()
    names = args.only or [spec.name for spec in list_envs()]
    header = (
        "env",
        "in process CPU us",
        "remote CPU us (ours)",
        "remote CPU us (Pillow decode)",
        "CPU saved",
        "remote vs in process",
        "remote wall us (ours)",
    )
    rows = []
    with server(names) as url:
        for name in names:
            script = episodes(name, args.steps)
            local_cpu, _, local_pixels = play(build_env(name), script)
            measured: dict[str, list[tuple[float, float]]] = {"ours": [], "pillow": []}
            for label, decode in [("ours", None), ("pillow", pillow_decode)] * args.rounds:
                remote = RemoteEnv(url, name, timeout_s=60)
                with decoder(decode):
                    cpu, wall, pixels = play(remote, script)
                remote.close()
                assert pixels == local_pixels, f"{name}: the served images differ from the in-process ones"
                measured[label].append((cpu, wall))
            (ours, wall), (before, _) = min(measured["ours"]), min(measured["pillow"])
            rows.append(
                (
                    name,
                    f"{local_cpu * 1e6:,.0f}",
                    f"{ours * 1e6:,.0f}",
                    f"{before * 1e6:,.0f}",
                    f"{(before - ours) * 1e6:,.0f} us ({before / ours:.2f}x)",
                    f"{ours / local_cpu:.1f}x",
                    f"{wall * 1e6:,.0f}",
                )
            )
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print(
        f"\n{args.steps} steps per env and way, {args.rounds} rounds; {cpu_model()}; "
        f"Pillow {Image.__version__}."
    )


if __name__ == "__main__":
    main()
