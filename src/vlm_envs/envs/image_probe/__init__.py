"""ImageProbe: name the colour of each turn's image, a probe for images lost after turn 1.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("image_probe")`` call. See :mod:`vlm_envs.envs.image_probe.env`.
"""

from __future__ import annotations

from vlm_envs.envs.image_probe.config import COLORS, ImageProbeConfig
from vlm_envs.envs.image_probe.env import ImageProbeEnv

__all__ = ["COLORS", "ImageProbeConfig", "ImageProbeEnv", "build_env"]

description = ImageProbeEnv.__doc__ or ""

build_env = ImageProbeEnv.from_trainer
