"""RushHour: slide cars and trucks to let the red car out (planning with many pieces, a BFS oracle).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("rush_hour")`` call. See :mod:`vlm_envs.envs.rush_hour.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.rush_hour.config import RushHourConfig
from vlm_envs.envs.rush_hour.env import RushHourEnv
from vlm_envs.envs.rush_hour.generator import generate
from vlm_envs.protocol import trainer_env_config

__all__ = ["RushHourConfig", "RushHourEnv", "build_env", "generate"]

description = RushHourEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> RushHourEnv:
    """A Rush Hour env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and
    the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return RushHourEnv(RushHourConfig(**trainer_env_config(sample, args, config)))
