"""ZoomSearch: a large seeded canvas of coded objects; the target's code is readable only through ``zoom``.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("zoom_search")`` call; config keys are the fields of :class:`ZoomSearchConfig`.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.zoom_search.config import ZoomSearchConfig
from vlm_envs.envs.zoom_search.env import ZoomSearchEnv
from vlm_envs.protocol import trainer_env_config

__all__ = ["ZoomSearchConfig", "ZoomSearchEnv", "build_env"]

description = ZoomSearchEnv.description


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ZoomSearchEnv:
    """A ZoomSearch env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and the
    trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return ZoomSearchEnv(ZoomSearchConfig(**trainer_env_config(sample, args, config)))
