"""SlidingPuzzle: slide numbered tiles into order (the 8- and 15-puzzle; planning with an optimal oracle).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("sliding_puzzle")`` call. See :mod:`vlm_envs.envs.sliding_puzzle.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.sliding_puzzle.config import SlidingPuzzleConfig
from vlm_envs.envs.sliding_puzzle.env import SlidingPuzzleEnv
from vlm_envs.envs.sliding_puzzle.solver import solve

__all__ = ["SlidingPuzzleConfig", "SlidingPuzzleEnv", "build_env", "solve"]

description = SlidingPuzzleEnv.__doc__ or ""

build_env = SlidingPuzzleEnv.from_trainer
