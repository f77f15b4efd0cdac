"""Tower of Hanoi: gather every disk on the goal peg, one at a time, never a larger disk on a smaller one.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("tower_of_hanoi")`` call. See :mod:`vlm_envs.envs.tower_of_hanoi.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.tower_of_hanoi.config import TowerOfHanoiConfig
from vlm_envs.envs.tower_of_hanoi.env import TowerOfHanoiEnv
from vlm_envs.envs.tower_of_hanoi.pegs import draw_start, move_error, moved, shortest_moves

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

build_env = TowerOfHanoiEnv.from_trainer
