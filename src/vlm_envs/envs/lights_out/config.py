"""Lights Out's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    ActionsPerTurn,
    RenderedConfig,
    RenderMode,
    TurnCap,
    turn_cap,
)

#: The turn cap of a config that needs no more (:attr:`LightsOutConfig.turn_limit`).
DEFAULT_MAX_TURNS = 8


class LightsOutConfig(RenderedConfig):
    """Everything that defines a Lights Out episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"n": 3, "scramble_presses": 2},
        "medium": {"n": 4, "scramble_presses": 5},
        "hard": {"n": 5, "scramble_presses": 10},
    }

    #: Lights per side of the board.
    n: int = Field(5, ge=2, le=8)
    #: Distinct random presses on a dark board that make the puzzle (the fewest presses that solve it
    #: are at most this many).
    scramble_presses: int = Field(6, ge=1, le=64)
    render_mode: RenderMode = "vision"
    max_presses_per_turn: ActionsPerTurn = 3
    #: ``None``: 8 turns, or the turns the longest smallest solution takes where that is more (see
    #: :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Pixels per light of the image.
    cell_size: int = Field(64, ge=16, le=256)

    @model_validator(mode="after")
    def _check(self) -> LightsOutConfig:
        if self.scramble_presses > self.n * self.n:
            raise ValueError(f"scramble_presses {self.scramble_presses} exceeds the {self.n * self.n} lights")
        return self

    @property
    def turns_needed(self) -> int:
        """The turns the oracle's longest episode takes: a smallest solution presses at most the
        ``scramble_presses`` lights that made the board, ``max_presses_per_turn`` a turn."""
        return math.ceil(self.scramble_presses / self.max_presses_per_turn)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else 8 or :attr:`turns_needed` where that is more."""
        return turn_cap(self.max_turns, DEFAULT_MAX_TURNS, self.turns_needed)
