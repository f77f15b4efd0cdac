"""Jigsaw: swap the shuffled tiles of a picture back into place (fine visual matching across edges).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("jigsaw")`` call. See :mod:`vlm_envs.envs.jigsaw.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.jigsaw.board import optimal_swaps, oracle_swaps
from vlm_envs.envs.jigsaw.config import JigsawConfig
from vlm_envs.envs.jigsaw.env import JigsawEnv

__all__ = ["JigsawConfig", "JigsawEnv", "build_env", "optimal_swaps", "oracle_swaps"]

description = JigsawEnv.__doc__ or ""

build_env = JigsawEnv.from_trainer
