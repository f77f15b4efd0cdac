"""What saying where the episode stands adds to a served step, per env: ``signal_fields`` (the env's
``state_key``, ``state_text`` and ``distance_to_goal``, checked, as every reset and step reply of ``vlm-envs
serve`` carries them) against the work a worker did for a step before it (``env.step`` and the reply's
encoding, ``reply_body``: PNG, base64, JSON), measured in the same run, step by step.

Random play (``random_response``, seeds 0..): the states a solver-backed distance meets off the oracle's
path, where nothing is cached. Time is this thread's CPU (``time.thread_time``), so other processes on the
machine move it little. Run: ``PYTHONPATH=src .venv/bin/python benchmarks/serve_signals.py [--steps N]
[--only NAME ...] [--difficulty hard]``.
"""

from __future__ import annotations

import argparse
import random
import time

from load_client import cpu_model
from vlm_envs import build_env, list_envs
from vlm_envs.serve.env_calls import signal_fields
from vlm_envs.serve.wire import reply_body


def measure(name: str, steps: int, config: dict) -> tuple[list[float], list[float]]:
    """Per step: the CPU seconds of the step and its reply encoding, and of the signals after it."""
    env, rng = build_env(name, **config), random.Random(0)
    before: list[float] = []
    signals: list[float] = []
    seed = 0
    while len(before) < steps:
        env.reset(seed=seed)
        seed, done = seed + 1, False
        while not done and len(before) < steps:
            reply = env.random_response(rng)
            t0 = time.thread_time()
            obs, done, info = env.step(reply)
            reply_body(obs, info, done, env.episode_reward() if env.has_episode_reward else None, {})
            t1 = time.thread_time()
            signal_fields(env)
            before.append(t1 - t0)
            signals.append(time.thread_time() - t1)
    env.close()
    return before, signals


def ms(values: list[float], q: float) -> str:
    return f"{sorted(values)[int(q * (len(values) - 1))] * 1e3:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="random steps per env (default 1000)")
    parser.add_argument("--only", nargs="*", default=None, help="these envs only")
    parser.add_argument("--difficulty", default=None, help="every env's difficulty preset")
    args = parser.parse_args()
    names = args.only or [spec.name for spec in list_envs()]
    config = {} if args.difficulty is None else {"difficulty": args.difficulty}
    header = ["env", "step + reply CPU p50 ms", "p99", "signals CPU p50 ms", "p90", "p99", "max", "added"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for name in names:
        before, signals = measure(name, args.steps, config)
        added = f"{sum(signals) / sum(before):.0%}"
        row = [name, ms(before, 0.5), ms(before, 0.99), ms(signals, 0.5), ms(signals, 0.9), ms(signals, 0.99)]
        print("| " + " | ".join([*row, f"{max(signals) * 1e3:.2f}", added]) + " |")
    print(f"\n{args.steps} random steps per env, difficulty {args.difficulty or 'default'}; {cpu_model()}.")


if __name__ == "__main__":
    main()
