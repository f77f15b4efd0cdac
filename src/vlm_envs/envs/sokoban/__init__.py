"""Sokoban: a seed-exact visual puzzle env with solvable levels of chosen difficulty.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path``
and ``vlm_envs.build_env("sokoban")`` call; ``solve(level_ascii)`` returns an optimal move string.
See :mod:`vlm_envs.envs.sokoban.env` for the observation, action and reward rules.
"""

from __future__ import annotations

from vlm_envs.envs.sokoban.board import Layout, LevelError, State, parse_level, to_ascii
from vlm_envs.envs.sokoban.config import SokobanConfig
from vlm_envs.envs.sokoban.env import SokobanEnv
from vlm_envs.envs.sokoban.generator import Difficulty, GeneratedLevel, generate_level
from vlm_envs.envs.sokoban.render import frame_data_uri, frame_png
from vlm_envs.envs.sokoban.solver import solve, solve_state

__all__ = [
    "Difficulty",
    "GeneratedLevel",
    "Layout",
    "LevelError",
    "SokobanConfig",
    "SokobanEnv",
    "State",
    "build_env",
    "frame_data_uri",
    "frame_png",
    "generate_level",
    "parse_level",
    "solve",
    "solve_state",
    "to_ascii",
]

description = SokobanEnv.__doc__ or ""

build_env = SokobanEnv.from_trainer
