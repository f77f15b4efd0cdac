"""ClutterCount: a seeded picture of overlapping shapes; count one colour and kind, with a ``mark`` tool.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("clutter_count")`` call; config keys are the fields of :class:`ClutterCountConfig`.
"""

from __future__ import annotations

from vlm_envs.envs.clutter_count.config import ClutterCountConfig
from vlm_envs.envs.clutter_count.env import ClutterCountEnv

__all__ = ["ClutterCountConfig", "ClutterCountEnv", "build_env"]

description = ClutterCountEnv.description

build_env = ClutterCountEnv.from_trainer
