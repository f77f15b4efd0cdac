"""Matchstick's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from vlm_envs.envs.config import EnvConfig, TurnCap


class MatchstickConfig(EnvConfig):
    """Everything that defines a Matchstick episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"digits": 1, "operators": "+", "max_turns": 3},
        "medium": {"digits": 1, "operators": "+-", "max_turns": 2},
        "hard": {"digits": 2, "operators": "+-", "max_turns": 1},
    }

    #: Each number left of ``=`` has 1 to this many digits.
    digits: int = Field(1, ge=1, le=3)
    #: The operators the true equation may use: ``+`` only, or ``+`` and ``-``.
    operators: Literal["+", "+-"] = "+-"
    #: Answers the model may give.
    max_turns: TurnCap = 2
    #: Length of a matchstick in pixels.
    stick_px: int = Field(32, ge=12, le=128)
