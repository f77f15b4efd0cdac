"""Lights Out: press lights (each toggles itself and its four neighbours) until the board is dark.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("lights_out")`` call. See :mod:`vlm_envs.envs.lights_out.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.lights_out.board import fewest_presses, press, scramble
from vlm_envs.envs.lights_out.config import LightsOutConfig
from vlm_envs.envs.lights_out.env import LightsOutEnv
from vlm_envs.protocol import trainer_env_config

__all__ = ["LightsOutConfig", "LightsOutEnv", "build_env", "fewest_presses", "press", "scramble"]

description = LightsOutEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> LightsOutEnv:
    """A Lights Out env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and
    the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return LightsOutEnv(LightsOutConfig(**trainer_env_config(sample, args, config)))
