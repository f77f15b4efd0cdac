"""Falling blocks (Tetris): drop each piece of a seeded sequence into a well to clear lines of garbage.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("falling_blocks")`` call. See :mod:`vlm_envs.envs.falling_blocks.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.falling_blocks.config import FallingBlocksConfig
from vlm_envs.envs.falling_blocks.env import FallingBlocksEnv
from vlm_envs.envs.falling_blocks.generator import Level, LevelSpec, generate_level
from vlm_envs.envs.falling_blocks.solver import Solver, fewest_placements_bound

__all__ = [
    "FallingBlocksConfig",
    "FallingBlocksEnv",
    "Level",
    "LevelSpec",
    "Solver",
    "build_env",
    "fewest_placements_bound",
    "generate_level",
]

description = FallingBlocksEnv.__doc__ or ""

build_env = FallingBlocksEnv.from_trainer
