"""SlidingPuzzle: slide numbered tiles into order (the 8- and 15-puzzle; planning with an optimal oracle).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("sliding_puzzle")`` call. See :mod:`vlm_envs.envs.sliding_puzzle.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.sliding_puzzle.config import SlidingPuzzleConfig
from vlm_envs.envs.sliding_puzzle.env import SlidingPuzzleEnv
from vlm_envs.envs.sliding_puzzle.solver import solve
from vlm_envs.protocol import trainer_env_config

__all__ = ["SlidingPuzzleConfig", "SlidingPuzzleEnv", "build_env", "solve"]

description = SlidingPuzzleEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> SlidingPuzzleEnv:
    """A SlidingPuzzle env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins)
    and the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return SlidingPuzzleEnv(SlidingPuzzleConfig(**trainer_env_config(sample, args, config)))
