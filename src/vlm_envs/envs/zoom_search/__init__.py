"""ZoomSearch: a large seeded canvas of coded objects; the target's code is readable only through ``zoom``.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("zoom_search")`` call; config keys are the fields of :class:`ZoomSearchConfig`.
"""

from __future__ import annotations

from vlm_envs.envs.zoom_search.config import ZoomSearchConfig
from vlm_envs.envs.zoom_search.env import ZoomSearchEnv

__all__ = ["ZoomSearchConfig", "ZoomSearchEnv", "build_env"]

description = ZoomSearchEnv.description

build_env = ZoomSearchEnv.from_trainer
