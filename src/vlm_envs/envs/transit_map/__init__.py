"""TransitMap: read a schematic transit map and travel from a start stop to a destination in the fewest rides.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("transit_map")`` call. See :mod:`vlm_envs.envs.transit_map.env` for the rules.
"""

from __future__ import annotations

from vlm_envs.envs.transit_map.config import TransitMapConfig
from vlm_envs.envs.transit_map.env import TransitMapEnv
from vlm_envs.envs.transit_map.network import Line, Network, Trip, draw_trip

__all__ = ["Line", "Network", "TransitMapConfig", "TransitMapEnv", "Trip", "build_env", "draw_trip"]

description = TransitMapEnv.__doc__ or ""

build_env = TransitMapEnv.from_trainer
