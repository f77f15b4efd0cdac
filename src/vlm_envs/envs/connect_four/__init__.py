"""Connect Four: beat a deterministic engine of chosen depth from a position where a win is in reach.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("connect_four")`` call. See :mod:`vlm_envs.envs.connect_four.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.connect_four.config import ConnectFourConfig
from vlm_envs.envs.connect_four.engine import horizon, reply
from vlm_envs.envs.connect_four.env import ConnectFourEnv
from vlm_envs.envs.connect_four.generator import generate
from vlm_envs.envs.connect_four.solver import shortest_win

__all__ = ["ConnectFourConfig", "ConnectFourEnv", "build_env", "generate", "horizon", "reply", "shortest_win"]

description = ConnectFourEnv.__doc__ or ""

build_env = ConnectFourEnv.from_trainer
