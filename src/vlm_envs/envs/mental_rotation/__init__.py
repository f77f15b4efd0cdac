"""MentalRotation: turn a polycube until it looks like the target (or tell rotation from mirror).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("mental_rotation")`` call. See :mod:`vlm_envs.envs.mental_rotation.env`.
"""

from __future__ import annotations

from vlm_envs.envs.mental_rotation.config import MentalRotationConfig
from vlm_envs.envs.mental_rotation.env import MentalRotationEnv
from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, TURN_NAMES, shortest_turns, turn

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

build_env = MentalRotationEnv.from_trainer
