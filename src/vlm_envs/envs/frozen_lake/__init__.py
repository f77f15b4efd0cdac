"""FrozenLake: cross a frozen lake to the goal without falling into a hole (gymnasium's toy-text rules,
VAGEN's and ROLL's visual baseline env; slippery ice as an option).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("frozen_lake")`` call. See :mod:`vlm_envs.envs.frozen_lake.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.frozen_lake.config import FrozenLakeConfig
from vlm_envs.envs.frozen_lake.env import FrozenLakeEnv
from vlm_envs.envs.frozen_lake.lake import Lake, generate_lake, gymnasium_lake, shortest_path

__all__ = [
    "FrozenLakeConfig",
    "FrozenLakeEnv",
    "Lake",
    "build_env",
    "generate_lake",
    "gymnasium_lake",
    "shortest_path",
]

description = FrozenLakeEnv.__doc__ or ""

build_env = FrozenLakeEnv.from_trainer
