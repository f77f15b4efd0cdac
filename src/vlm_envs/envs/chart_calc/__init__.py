"""ChartCalc: charts drawn from a seed with exact value labels, arithmetic questions, a safe ``calc`` tool.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("chart_calc")`` call; config keys are the fields of :class:`ChartCalcConfig`.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.chart_calc.calc import CalcError, evaluate
from vlm_envs.envs.chart_calc.config import ChartCalcConfig
from vlm_envs.envs.chart_calc.env import ChartCalcEnv
from vlm_envs.protocol import trainer_env_config

__all__ = ["CalcError", "ChartCalcConfig", "ChartCalcEnv", "build_env", "evaluate"]

description = ChartCalcEnv.description


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ChartCalcEnv:
    """A ChartCalc env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and the
    trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    return ChartCalcEnv(ChartCalcConfig(**trainer_env_config(sample, args, config)))
