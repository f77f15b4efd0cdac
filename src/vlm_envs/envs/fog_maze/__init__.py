"""FogMaze: reach the goal of a maze seen only nearby, so what the model saw earlier must be remembered.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("fog_maze")`` call. See :mod:`vlm_envs.envs.fog_maze.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.fog_maze.config import FogMazeConfig
from vlm_envs.envs.fog_maze.env import FogMazeEnv
from vlm_envs.envs.fog_maze.maze import Maze, generate_maze
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.protocol import trainer_env_config

__all__ = ["FogMazeConfig", "FogMazeEnv", "Maze", "build_env", "generate_maze", "shortest_actions"]

description = FogMazeEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> FogMazeEnv:
    """A FogMaze env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and
    the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return FogMazeEnv(FogMazeConfig(**trainer_env_config(sample, args, config)))
