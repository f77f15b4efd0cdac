"""Per env and difficulty level: the oracle's win rate, a random player's, and the mean optimal length.

For every registered env (or those named) and each level its presets have (``difficulty`` easy, medium,
hard; an env without presets gets one ``-`` row of its defaults), seeds 0..N-1 are played twice: by the
oracle (``env.oracle_response()``, which must win every one) and by the random player
(``env.random_response(rng)`` with the ``random`` policy's own generator,
:func:`vlm_envs.eval.policies.policy_rng`, as in ``vlm-envs eval``). A win is an episode reward of at least
1.0. The optimal length is the reset info's ``optimal_*`` count (moves, swaps, turns) where the env reports
one, else the oracle's replies; ``oracle turns`` is the replies the oracle took. The last column says
whether the random player's success falls from easy to hard (``floor``: under 1% even on easy, where a
random answer is never right, so it cannot tell the levels apart). ``NAME[:KEY=VALUE,...]`` adds config to an
env (values parse as JSON where they can).

Run: ``.venv/bin/python benchmarks/oracle_random_success.py [ENV ...] [--seeds 200] [--levels easy,hard]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from typing import Any

from vlm_envs import build_env, list_envs
from vlm_envs.envs.config import LEVELS
from vlm_envs.eval.policies import RandomPolicy, policy_rng

MAX_STEPS = 500
#: Below this success on easy, the random player cannot tell levels apart (a random code or number is
#: never right): the last column says ``floor`` rather than comparing noise.
RANDOM_FLOOR = 0.01


@dataclass(frozen=True)
class Played:
    """One policy's episodes on one env config."""

    wins: int
    seeds: int
    turns: float
    optimal: float
    unit: str

    @property
    def rate(self) -> float:
        return self.wins / self.seeds


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


def optimal_of(info: dict[str, Any]) -> tuple[str, float] | None:
    """The reset info's optimal length (``optimal_moves``, ``optimal_swaps``, ...), if it reports one."""
    for key, value in info.items():
        if key.startswith("optimal_") and isinstance(value, int) and not isinstance(value, bool):
            return key.removeprefix("optimal_"), float(value)
    return None


def play(name: str, config: dict[str, Any], policy: str, seeds: int) -> Played:
    env = build_env(name, **config)
    wins, turns, optimal, unit = 0, [], [], "replies"
    for seed in range(seeds):
        _, info = env.reset(seed=seed)
        rng = policy_rng(RandomPolicy.rng_salt, seed)
        replies, done = 0, False
        while not done and replies < MAX_STEPS:
            reply = env.oracle_response() if policy == "oracle" else env.random_response(rng)
            done = env.step(reply if reply is not None else "")[1]
            replies += 1
        wins += env.episode_reward() >= 1.0
        turns.append(replies)
        reported = optimal_of(info)
        if reported is not None:
            unit, length = reported
            optimal.append(length)
    env.close()
    mean_turns = statistics.fmean(turns)
    return Played(wins, seeds, mean_turns, statistics.fmean(optimal) if optimal else mean_turns, unit)


def levels_of(name: str, config: dict[str, Any], wanted: list[str]) -> list[str | None]:
    """The levels of ``wanted`` the env has presets for; ``[None]`` (its defaults) when it has none."""
    have = []
    for level in wanted:
        try:
            build_env(name, **config, difficulty=level).close()
        except (TypeError, ValueError):  # no presets (an env of one's own may not take the key at all)
            continue
        have.append(level)
    return have or [None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="env names or module paths (default: every registered env)")
    parser.add_argument("--seeds", type=int, default=200, help="seeds 0..N-1 per env and level (default 200)")
    parser.add_argument("--levels", default=",".join(LEVELS), help="levels to play (default all three)")
    args = parser.parse_args()
    specs = args.envs or [spec.name for spec in list_envs()]
    wanted = [level for level in args.levels.split(",") if level]
    print(f"Success over seeds 0..{args.seeds - 1} per env and difficulty\n")
    print("| env | level | oracle | random | mean optimal length | oracle turns | random: hard < easy |")
    print("|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    for spec in specs:
        name, config = parse(spec)
        random_rates: dict[str | None, float] = {}
        for level in levels_of(name, config, wanted):
            cfg = config if level is None else {**config, "difficulty": level}
            oracle = play(name, cfg, "oracle", args.seeds)
            random = play(name, cfg, "random", args.seeds)
            random_rates[level] = random.rate
            verdict = ""
            if level == "hard" and "easy" in random_rates:
                easy = random_rates["easy"]
                verdict = "floor" if easy < RANDOM_FLOOR else "yes" if random.rate < easy else "**no**"
            print(
                f"| {spec} | {level or '-'} | {oracle.rate:.1%} | {random.rate:.1%} | "
                f"{oracle.optimal:.1f} {oracle.unit} | {oracle.turns:.1f} | {verdict} |",
                flush=True,
            )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
