"""MentalRotation: turn a polycube until it looks like the target (or tell rotation from mirror).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("mental_rotation")`` call. See :mod:`vlm_envs.envs.mental_rotation.env`.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.mental_rotation.config import MentalRotationConfig
from vlm_envs.envs.mental_rotation.env import MentalRotationEnv
from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, TURN_NAMES, shortest_turns, turn
from vlm_envs.protocol import trainer_env_config

__all__ = [
    "ROTATIONS",
    "TURN_NAMES",
    "MentalRotationConfig",
    "MentalRotationEnv",
    "build_env",
    "shortest_turns",
    "turn",
]

description = MentalRotationEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> MentalRotationEnv:
    """A MentalRotation env from per-sample ``metadata["env_config"]``, explicit ``config`` (which
    wins) and the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return MentalRotationEnv(MentalRotationConfig(**trainer_env_config(sample, args, config)))
