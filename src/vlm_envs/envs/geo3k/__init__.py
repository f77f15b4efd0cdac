"""Geo3k: geometry problems with diagrams and a ``calc_score`` tool (slime's multi-turn geo3k contract).

``build_env(sample, args, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("geo3k")`` call. Config keys: ``max_turns``; ``problem``/``answer``/``images``
(one fixed problem); ``dataset``/``split``/``limit`` (problems from a geo3k dataset, through
:mod:`vlm_envs.envs.geo3k.datasets`); ``kinds``/``image_size`` (the procedural generator, the default);
``grade_timeout`` (seconds per answer check); ``difficulty`` (easy, medium, hard: a preset of ``kinds`` and
``max_turns``, see :data:`vlm_envs.envs.geo3k.env.PRESETS`).
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.geo3k.datasets import load_problems
from vlm_envs.envs.geo3k.env import DEFAULT_MAX_TURNS, Geo3kEnv
from vlm_envs.envs.geo3k.problems import KINDS, Geo3kProblem, generate_problem
from vlm_envs.envs.geo3k.samples import problem_from_sample
from vlm_envs.protocol import args_max_turns, resolve_env_config

_ENV_KEYS = {"max_turns", "kinds", "image_size", "grade_timeout", "difficulty"}
_PROBLEM_KEYS = {"problem", "answer", "images"}
_DATASET_KEYS = {"dataset", "split", "limit"}
#: Config keys that name files, folders or hub ids (vlm_envs.envs.config.location_keys): never a row's.
LOCATION_KEYS = frozenset({"dataset"})


def build_env(sample: Any = None, args: Any = None, **config: Any) -> Geo3kEnv:
    """A Geo3kEnv for a slime Sample or dataset row, a configured problem or dataset, or the generator.

    ``max_turns`` comes from the config, else its ``difficulty`` preset, else ``args.max_turns``, else 3.
    """
    config = resolve_env_config(sample, config)
    unknown = set(config) - _ENV_KEYS - _PROBLEM_KEYS - _DATASET_KEYS
    if unknown:
        allowed = ", ".join(sorted(_ENV_KEYS | _PROBLEM_KEYS | _DATASET_KEYS))
        raise ValueError(f"geo3k: unknown config key(s) {sorted(unknown)}; known keys: {allowed}")
    env_kwargs = {k: config[k] for k in _ENV_KEYS if k in config}
    if config.get("max_turns") is None and config.get("difficulty") is None:
        env_kwargs["max_turns"] = args_max_turns(args, DEFAULT_MAX_TURNS)
    if _PROBLEM_KEYS & set(config):
        return Geo3kEnv(problem=problem_from_sample(config, source="config"), **env_kwargs)
    if sample is not None:
        return Geo3kEnv(problem=problem_from_sample(sample), **env_kwargs)
    if "dataset" in config:
        problems = load_problems(
            config["dataset"], split=config.get("split", "train"), limit=config.get("limit")
        )
        return Geo3kEnv(problems=problems, **env_kwargs)
    return Geo3kEnv(**env_kwargs)


description = Geo3kEnv.description

__all__ = ["KINDS", "Geo3kEnv", "Geo3kProblem", "build_env", "generate_problem"]
