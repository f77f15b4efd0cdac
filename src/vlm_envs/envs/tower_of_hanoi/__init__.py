"""Tower of Hanoi: gather every disk on the goal peg, one at a time, never a larger disk on a smaller one.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("tower_of_hanoi")`` call. See :mod:`vlm_envs.envs.tower_of_hanoi.env` for the rules.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.tower_of_hanoi.config import TowerOfHanoiConfig
from vlm_envs.envs.tower_of_hanoi.env import TowerOfHanoiEnv
from vlm_envs.envs.tower_of_hanoi.pegs import draw_start, move_error, moved, shortest_moves
from vlm_envs.protocol import trainer_env_config

__all__ = [
    "TowerOfHanoiConfig",
    "TowerOfHanoiEnv",
    "build_env",
    "draw_start",
    "move_error",
    "moved",
    "shortest_moves",
]

description = TowerOfHanoiEnv.__doc__ or ""


def build_env(sample: Any = None, args: Any = None, **config: Any) -> TowerOfHanoiEnv:
    """A Tower of Hanoi env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins)
    and the trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return TowerOfHanoiEnv(TowerOfHanoiConfig(**trainer_env_config(sample, args, config)))
