"""Matchstick: move one matchstick to make a false equation true (VisGym's matchstick equations).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("matchstick")`` call. See :mod:`vlm_envs.envs.matchstick.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.matchstick.config import MatchstickConfig
from vlm_envs.envs.matchstick.env import MatchstickEnv
from vlm_envs.envs.matchstick.equation import Equation, moves, one_move_away

__all__ = ["Equation", "MatchstickConfig", "MatchstickEnv", "build_env", "moves", "one_move_away"]

description = MatchstickEnv.__doc__ or ""

build_env = MatchstickEnv.from_trainer
