"""Jigsaw: swap the shuffled tiles of a picture back into place (fine visual matching across edges).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("jigsaw")`` call. See :mod:`vlm_envs.envs.jigsaw.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.jigsaw.board import optimal_swaps, oracle_swaps
from vlm_envs.envs.jigsaw.config import JigsawConfig
from vlm_envs.envs.jigsaw.env import JigsawEnv
from vlm_envs.protocol import trainer_env_config

__all__ = ["JigsawConfig", "JigsawEnv", "build_env", "optimal_swaps", "oracle_swaps"]

description = JigsawEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> JigsawEnv:
    """A Jigsaw env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and
    the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return JigsawEnv(JigsawConfig(**trainer_env_config(sample, args, config)))
