"""Matchstick: move one matchstick to make a false equation true (VisGym's matchstick equations).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("matchstick")`` call. See :mod:`vlm_envs.envs.matchstick.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.matchstick.config import MatchstickConfig
from vlm_envs.envs.matchstick.env import MatchstickEnv
from vlm_envs.envs.matchstick.equation import Equation, moves, one_move_away
from vlm_envs.protocol import trainer_env_config

__all__ = ["Equation", "MatchstickConfig", "MatchstickEnv", "build_env", "moves", "one_move_away"]

description = MatchstickEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> MatchstickEnv:
    """A Matchstick env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and
    the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return MatchstickEnv(MatchstickConfig(**trainer_env_config(sample, args, config)))
