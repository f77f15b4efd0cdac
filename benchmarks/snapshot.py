"""Snapshot size and restore time per env at turn 1, 10 and 50, beside a plain replay from reset.

Each env is built with ``max_turns=64`` where its config takes one (else its default) and plays a seeded
episode of ``random_response`` replies (which keep most episodes alive); at each target turn the episode
is snapshot, and the turn actually reached is printed (an episode that ends sooner caps it). ``size`` is
``len(json.dumps(snapshot))``; ``restore`` is ``env.restore(snapshot)`` into a fresh env of the same config
(the digest, the checks and the replay); the baseline, measured in the same run on the same env, is the
replay alone: ``reset(seed)`` and the same replies through ``step``. Times are medians of ``--repeats``.
No bundled env keeps its own state codec (``snapshot_state``/``restore_state``): every restore is a replay.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/snapshot.py [--repeats 5] [NAME ...]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from load_client import cpu_model
from vlm_envs import build_env, list_envs
from vlm_envs.configured import EnvConfigError, build_configured_env
from vlm_envs.protocol import Env

TURNS = (1, 10, 50)
LONG_EPISODE = {"max_turns": 64}
SEED = 11


def long_env(name: str) -> tuple[Env, dict[str, Any]]:
    """The env with a turn cap of 64 where its config takes one, else with its default config."""
    try:
        return build_configured_env(name, None, LONG_EPISODE), LONG_EPISODE
    except EnvConfigError:
        return build_env(name), {}


def median_ms(fns: list[Callable[[], Any]], repeats: int) -> list[float]:
    """The median time of each of ``fns``, called in turn ``repeats`` times (interleaved: one's warm
    caches favour none)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, spent in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            spent.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(spent) for spent in times]


def replay(env: Env, seed: int, replies: list[str]) -> None:
    """The baseline: the episode played again from its reset, without the snapshot machinery."""
    env.reset(seed=seed)
    for reply in replies:
        env.step(reply)


def measure(name: str, repeats: int) -> list[dict[str, Any]]:
    env, config = long_env(name)
    fresh, _ = long_env(name)
    rng = random.Random(SEED)
    env.reset(seed=SEED)
    replies: list[str] = []
    rows, done = [], False
    for target in TURNS:
        while len(replies) < target and not done:
            replies.append(env.random_response(rng))
            _, done, _ = env.step(replies[-1])
        snapshot = env.snapshot()
        snapshot_ms, restore_ms, replay_ms = median_ms(
            [
                env.snapshot,
                lambda s=snapshot: fresh.restore(s),
                lambda r=list(replies): replay(fresh, SEED, r),
            ],
            repeats,
        )
        rows.append(
            {
                "env": name,
                "config": ",".join(f"{k}={v}" for k, v in config.items()) or "default",
                "target": target,
                "turn": len(replies),
                "bytes": len(json.dumps(snapshot)),
                "snapshot_ms": snapshot_ms,
                "restore_ms": restore_ms,
                "replay_ms": replay_ms,
            }
        )
        if done:
            break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="envs to measure (default: every registered env)")
    parser.add_argument("--repeats", type=int, default=5, help="timed restores per cell (default 5)")
    args = parser.parse_args()
    names = args.names or [spec.name for spec in list_envs()]
    print(f"CPU: {cpu_model()}; Python {platform.python_version()}; median of {args.repeats}")
    header = (
        f"{'env':16} {'config':13} {'turn':>9} {'bytes':>7} {'snap ms':>8} {'restore ms':>11} "
        f"{'replay ms':>10} {'overhead':>9}"
    )
    print(header)
    print("-" * len(header))
    for name in names:
        for row in measure(name, args.repeats):
            turn = f"{row['turn']}/{row['target']}"
            overhead = row["restore_ms"] / row["replay_ms"] - 1 if row["replay_ms"] else 0.0
            print(
                f"{row['env']:16} {row['config']:13} {turn:>9} {row['bytes']:>7} {row['snapshot_ms']:>8.2f} "
                f"{row['restore_ms']:>11.2f} {row['replay_ms']:>10.2f} {overhead:>+9.1%}",
                flush=True,
            )


if __name__ == "__main__":
    main()
