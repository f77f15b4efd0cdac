"""ChartCalc: charts drawn from a seed with exact value labels, arithmetic questions, a safe ``calc`` tool.

``build_env(sample=None, args=None, **config)`` is what slime's ``rollout_interaction_env_path`` and
``vlm_envs.build_env("chart_calc")`` call; config keys are the fields of :class:`ChartCalcConfig`.
"""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.chart_calc.calc import CalcError, evaluate
from vlm_envs.envs.chart_calc.config import ChartCalcConfig
from vlm_envs.envs.chart_calc.env import ChartCalcEnv
from vlm_envs.protocol import args_max_turns, resolve_env_config

__all__ = ["CalcError", "ChartCalcConfig", "ChartCalcEnv", "build_env", "evaluate"]

description = ChartCalcEnv.description


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ChartCalcEnv:
    """A ChartCalc env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and the
    trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``."""
    merged = resolve_env_config(sample, config)
    max_turns = args_max_turns(args)
    if max_turns is not None and "max_turns" not in config:
        merged["max_turns"] = max_turns
    return ChartCalcEnv(ChartCalcConfig(**merged))
