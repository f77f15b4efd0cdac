"""SpotDifference: name the grid cells where altered copies of a drawn scene differ from the original, with a
zoom tool that shows the same box of every image.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("spot_difference")`` call; config keys are the fields of :class:`SpotDifferenceConfig`.
"""

from __future__ import annotations

from vlm_envs.envs.spot_difference.config import SpotDifferenceConfig
from vlm_envs.envs.spot_difference.env import SpotDifferenceEnv

__all__ = ["SpotDifferenceConfig", "SpotDifferenceEnv", "build_env"]

description = SpotDifferenceEnv.description

build_env = SpotDifferenceEnv.from_trainer
