"""Clock: read the time off an analog clock face (or tell the time some minutes later).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("clock")`` call. See :mod:`vlm_envs.envs.clock.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.clock.config import ClockConfig
from vlm_envs.envs.clock.dial import clock_image
from vlm_envs.envs.clock.env import ClockEnv
from vlm_envs.envs.clock.times import parse_time, spoken

__all__ = ["ClockConfig", "ClockEnv", "build_env", "clock_image", "parse_time", "spoken"]

description = ClockEnv.__doc__ or ""

build_env = ClockEnv.from_trainer
