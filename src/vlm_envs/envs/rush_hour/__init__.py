"""RushHour: slide cars and trucks to let the red car out (planning with many pieces, a BFS oracle).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("rush_hour")`` call. See :mod:`vlm_envs.envs.rush_hour.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.rush_hour.config import RushHourConfig
from vlm_envs.envs.rush_hour.env import RushHourEnv
from vlm_envs.envs.rush_hour.generator import generate

__all__ = ["RushHourConfig", "RushHourEnv", "build_env", "generate"]

description = RushHourEnv.__doc__ or ""

build_env = RushHourEnv.from_trainer
