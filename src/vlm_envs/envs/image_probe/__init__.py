"""ImageProbe: name the colour of each turn's image, a probe for images lost after turn 1.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("image_probe")`` call. See :mod:`vlm_envs.envs.image_probe.env`.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.image_probe.config import COLORS, ImageProbeConfig
from vlm_envs.envs.image_probe.env import ImageProbeEnv
from vlm_envs.protocol import trainer_env_config

__all__ = ["COLORS", "ImageProbeConfig", "ImageProbeEnv", "build_env"]

description = ImageProbeEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ImageProbeEnv:
    """An ImageProbe env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins)
    and the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return ImageProbeEnv(ImageProbeConfig(**trainer_env_config(sample, args, config)))
