"""FrameOrder: put the shuffled frames of an animation of moving, bouncing objects back in time order.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("frame_order")`` call. See :mod:`vlm_envs.envs.frame_order.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.frame_order.answer import parse_order
from vlm_envs.envs.frame_order.config import FrameOrderConfig
from vlm_envs.envs.frame_order.env import FrameOrderEnv
from vlm_envs.envs.frame_order.motion import Body, simulate
from vlm_envs.envs.frame_order.order import motion_matrix, order_gap

__all__ = [
    "Body",
    "FrameOrderConfig",
    "FrameOrderEnv",
    "build_env",
    "motion_matrix",
    "order_gap",
    "parse_order",
    "simulate",
]

description = FrameOrderEnv.__doc__ or ""

build_env = FrameOrderEnv.from_trainer
