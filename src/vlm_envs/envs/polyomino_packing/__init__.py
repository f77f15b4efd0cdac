"""PolyominoPacking: cover a region exactly with polyomino pieces (spatial fitting, turning and mirroring
shapes; an exact packing search for the oracle and the distance).

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("polyomino_packing")`` call. See :mod:`vlm_envs.envs.polyomino_packing.env` for the
rules.
"""

from __future__ import annotations

from vlm_envs.envs.polyomino_packing.config import PolyominoPackingConfig
from vlm_envs.envs.polyomino_packing.env import PolyominoPackingEnv
from vlm_envs.envs.polyomino_packing.generator import generate

__all__ = ["PolyominoPackingConfig", "PolyominoPackingEnv", "build_env", "generate"]

description = PolyominoPackingEnv.__doc__ or ""

build_env = PolyominoPackingEnv.from_trainer
