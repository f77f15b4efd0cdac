"""FogMaze: reach the goal of a maze seen only nearby, so what the model saw earlier must be remembered.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("fog_maze")`` call. See :mod:`vlm_envs.envs.fog_maze.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.fog_maze.config import FogMazeConfig
from vlm_envs.envs.fog_maze.env import FogMazeEnv
from vlm_envs.envs.fog_maze.maze import Maze, generate_maze
from vlm_envs.envs.fog_maze.oracle import shortest_actions

__all__ = ["FogMazeConfig", "FogMazeEnv", "Maze", "build_env", "generate_maze", "shortest_actions"]

description = FogMazeEnv.__doc__ or ""

build_env = FogMazeEnv.from_trainer
