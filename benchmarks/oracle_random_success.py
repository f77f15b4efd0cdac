"""Success rate of the oracle and of the random baseline (``random_response``) on seeds 0..N-1, per env.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/oracle_random_success.py NAME_OR_MODULE ... [--seeds 200]``.
"""

from __future__ import annotations

import argparse
import random

from vlm_envs import build_env

MAX_STEPS = 500


def success(name: str, policy: str, seeds: int) -> float:
    env = build_env(name)
    wins = 0
    for seed in range(seeds):
        env.reset(seed=seed)
        rng = random.Random(seed)
        for _ in range(MAX_STEPS):
            reply = env.oracle_response() if policy == "oracle" else None
            _, done, _ = env.step(reply if reply is not None else env.random_response(rng))
            if done:
                break
        wins += env.episode_reward() >= 1.0
    env.close()
    return wins / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="+")
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    print(f"{'env':32}  {'oracle':>7}  {'random':>7}")
    for name in args.envs:
        oracle, baseline = success(name, "oracle", args.seeds), success(name, "random", args.seeds)
        print(f"{name:32}  {oracle:7.1%}  {baseline:7.1%}")


if __name__ == "__main__":
    main()
