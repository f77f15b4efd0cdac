"""Success rate of each env's oracle and of the random baseline on seeds 0..N-1.

The random baseline plays ``env.random_response(rng)`` with the ``random`` policy's own generator
(:func:`vlm_envs.eval.policies.policy_rng`: independent of the env's stream, as in ``vlm-envs eval``);
a win is an episode reward of at least 1.0. Every registered env by default; ``NAME[:KEY=VALUE,...]``
picks envs and config variants (values parse as JSON where they can).

Run: ``.venv/bin/python benchmarks/oracle_random_success.py [ENV ...] [--seeds 200]``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from vlm_envs import build_env, list_envs
from vlm_envs.eval.policies import RandomPolicy, policy_rng

MAX_STEPS = 500


def parse(spec: str) -> tuple[str, dict[str, Any]]:
    name, _, pairs = spec.partition(":")
    config: dict[str, Any] = {}
    for pair in filter(None, pairs.split(",")):
        key, _, value = pair.partition("=")
        try:
            config[key] = json.loads(value)
        except ValueError:
            config[key] = value
    return name, config


def success(name: str, config: dict[str, Any], policy: str, seeds: int) -> float:
    env = build_env(name, **config)
    wins = 0
    for seed in range(seeds):
        env.reset(seed=seed)
        rng = policy_rng(RandomPolicy.rng_salt, seed)
        for _ in range(MAX_STEPS):
            reply = env.oracle_response() if policy == "oracle" else env.random_response(rng)
            if env.step(reply if reply is not None else "")[1]:
                break
        wins += env.episode_reward() >= 1.0
    env.close()
    return wins / seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="env names or module paths (default: every registered env)")
    parser.add_argument("--seeds", type=int, default=200)
    args = parser.parse_args()
    specs = args.envs or [spec.name for spec in list_envs()]
    print(f"Success over seeds 0..{args.seeds - 1}\n\n| env | oracle | random |\n|---|---|---|")
    for spec in specs:
        name, config = parse(spec)
        oracle, baseline = (
            success(name, config, "oracle", args.seeds),
            success(name, config, "random", args.seeds),
        )
        print(f"| {spec} | {oracle:.1%} | {baseline:.1%} |")


if __name__ == "__main__":
    main()
