"""Minesweeper: clear a field whose numbers are revealed turn by turn (partial information, no guessing).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("minesweeper")`` call. See :mod:`vlm_envs.envs.minesweeper.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.minesweeper.config import MinesweeperConfig
from vlm_envs.envs.minesweeper.deduce import deduce
from vlm_envs.envs.minesweeper.env import MinesweeperEnv
from vlm_envs.envs.minesweeper.generator import generate

__all__ = ["MinesweeperConfig", "MinesweeperEnv", "build_env", "deduce", "generate"]

description = MinesweeperEnv.__doc__ or ""

build_env = MinesweeperEnv.from_trainer
