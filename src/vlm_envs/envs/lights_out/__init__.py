"""Lights Out: press lights (each toggles itself and its four neighbours) until the board is dark.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("lights_out")`` call. See :mod:`vlm_envs.envs.lights_out.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.lights_out.board import fewest_presses, press, scramble
from vlm_envs.envs.lights_out.config import LightsOutConfig
from vlm_envs.envs.lights_out.env import LightsOutEnv

__all__ = ["LightsOutConfig", "LightsOutEnv", "build_env", "fewest_presses", "press", "scramble"]

description = LightsOutEnv.__doc__ or ""

build_env = LightsOutEnv.from_trainer
