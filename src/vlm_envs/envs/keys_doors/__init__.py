"""KeysDoors: fetch the key of each locked door, open it, avoid the lava and reach the goal (MiniGrid's
DoorKey, MultiRoom and LavaGap in one grid world).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("keys_doors")`` call. See :mod:`vlm_envs.envs.keys_doors.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.keys_doors.config import KeysDoorsConfig
from vlm_envs.envs.keys_doors.env import KeysDoorsEnv
from vlm_envs.envs.keys_doors.generate import generate_level
from vlm_envs.envs.keys_doors.solver import distance_table, plan
from vlm_envs.envs.keys_doors.world import Level, State

__all__ = [
    "KeysDoorsConfig",
    "KeysDoorsEnv",
    "Level",
    "State",
    "build_env",
    "distance_table",
    "generate_level",
    "plan",
]

description = KeysDoorsEnv.__doc__ or ""

build_env = KeysDoorsEnv.from_trainer
