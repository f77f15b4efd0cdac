"""ChartCalc: charts drawn from a seed with exact value labels, arithmetic questions, a safe ``calc`` tool.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("chart_calc")`` call; config keys are the fields of :class:`ChartCalcConfig`.
"""

from __future__ import annotations

from vlm_envs.envs.chart_calc.calc import CalcError, evaluate
from vlm_envs.envs.chart_calc.config import ChartCalcConfig
from vlm_envs.envs.chart_calc.env import ChartCalcEnv

__all__ = ["CalcError", "ChartCalcConfig", "ChartCalcEnv", "build_env", "evaluate"]

description = ChartCalcEnv.description

build_env = ChartCalcEnv.from_trainer
