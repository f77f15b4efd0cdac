"""Env speed, one row per env: reset and step p50/p99, images and pixels per turn, steps/s on one core.

Every env from ``vlm_envs.list_envs()`` is measured, plus any names or module paths given on the command
line (``benchmarks/env_speed.py vlm_envs.envs.zoom_search``). Episodes alternate between the oracle's
replies (where the env has an oracle) and ``random_response`` replies; one untimed warm-up episode goes
first. The process is pinned to one core. Targets for every env: reset p99 <= 150 ms, step p50 <= 5 ms,
printed beside each row as met/missed. steps/s counts steps per second of env time, resets included.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/env_speed.py [--only] [NAME_OR_MODULE ...]``.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from dataclasses import dataclass

import numpy as np

from vlm_envs import build_env, list_envs
from vlm_envs.protocol import Env, Observation

RESET_P99_TARGET_MS = 150.0
STEP_P50_TARGET_MS = 5.0
MAX_STEPS_PER_EPISODE = 100


@dataclass
class Timings:
    resets: list[float]
    steps: list[float]
    images: int = 0
    pixels: int = 0
    turns: int = 0

    def observe(self, obs: Observation) -> None:
        self.turns += 1
        self.images += len(obs.images)
        self.pixels += sum(im.width * im.height for im in obs.images)


def _reply(env: Env, oracle: bool, rng: random.Random) -> str:
    reply = env.oracle_response() if oracle else None
    return reply if reply is not None else env.random_response(rng)


def play(env: Env, seed: int, oracle: bool, timings: Timings | None) -> None:
    """One episode; its reset, steps and observations go into ``timings`` (none: a warm-up)."""
    rng = random.Random(seed)
    start = time.perf_counter()
    obs, _ = env.reset(seed=seed)
    elapsed = time.perf_counter() - start
    if timings is not None:
        timings.resets.append(elapsed * 1e3)
        timings.observe(obs)
    for _ in range(MAX_STEPS_PER_EPISODE):
        reply = _reply(env, oracle, rng)
        start = time.perf_counter()
        obs, done, _ = env.step(reply)
        elapsed = time.perf_counter() - start
        if timings is not None:
            timings.steps.append(elapsed * 1e3)
            timings.observe(obs)
        if done:
            return


def measure(name: str, episodes: int) -> Timings:
    env = build_env(name)
    try:
        play(env, 10**6, oracle=True, timings=None)
        timings = Timings([], [])
        for seed in range(episodes):
            play(env, seed, oracle=seed % 2 == 0, timings=timings)
        return timings
    finally:
        env.close()


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def row(name: str, t: Timings) -> tuple[str, ...]:
    reset50, reset99 = np.percentile(t.resets, [50, 99])
    step50, step99 = np.percentile(t.steps, [50, 99])
    rate = len(t.steps) / ((sum(t.steps) + sum(t.resets)) / 1e3)
    return (
        name,
        f"{reset50:.1f}",
        f"{reset99:.1f}",
        f"{step50:.2f}",
        f"{step99:.2f}",
        f"{t.images / t.turns:.2f}",
        f"{t.pixels / t.turns / 1e6:.3f}",
        f"{rate:,.0f}",
        f"{_met(reset99 <= RESET_P99_TARGET_MS)} (<= {RESET_P99_TARGET_MS:g})",
        f"{_met(step50 <= STEP_P50_TARGET_MS)} (<= {STEP_P50_TARGET_MS:g})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="more env names or module paths (vlm_envs.envs.NAME)")
    parser.add_argument("--episodes", type=int, default=60, help="timed episodes per env (default 60)")
    parser.add_argument("--core", type=int, default=0, help="the core to pin this process to")
    parser.add_argument("--only", action="store_true", help="measure only the envs named, not every env")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.core})
    every = [] if args.only else [spec.name for spec in list_envs()]
    names = list(dict.fromkeys(every + args.envs))
    header = (
        "env",
        "reset p50 ms",
        "reset p99 ms",
        "step p50 ms",
        "step p99 ms",
        "images/turn",
        "Mpx/turn",
        "steps/s",
        "reset p99 target",
        "step p50 target",
    )
    rows = [row(name, measure(name, args.episodes)) for name in names]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for line in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)))
    print(
        f"\n{args.episodes} episodes per env (even seeds: oracle replies where the env has an oracle; odd: "
        "random_response), one core; a turn is an observation (reset or step)."
    )


if __name__ == "__main__":
    main()
