"""Minesweeper's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap, turn_cap

#: The densest field allowed: past a quarter of the cells, fields need many hints to avoid guessing.
MAX_DENSITY = 0.25
#: The turn cap of a config that needs no more (:attr:`MinesweeperConfig.turn_limit`).
DEFAULT_MAX_TURNS = 20
#: About the most cells the oracle reveals in a turn (it takes up to three groups of cells, each proven by
#: one number): the measured bound of :attr:`MinesweeperConfig.turns_needed` uses it.
ORACLE_CELLS_PER_TURN = 6


class MinesweeperConfig(RenderedConfig):
    """Everything that defines a Minesweeper episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"size": (6, 6), "mines": 4},
        "medium": {"size": (8, 8), "mines": 10},
        "hard": {"size": (10, 10), "mines": 18, "max_turns": 30},
    }

    #: (rows, cols): 4 to 16 each.
    size: tuple[int, int] = (8, 8)
    mines: int = Field(10, ge=1)
    render_mode: RenderMode = "vision"
    #: Cells one reply may reveal.
    max_actions_per_turn: ActionsPerTurn = 6
    #: ``None``: 20 turns, or the turns the oracle's longest game takes where that is more (see
    #: :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Side of a cell in pixels.
    cell_size: int = Field(32, ge=12, le=128)

    @model_validator(mode="after")
    def _check(self) -> MinesweeperConfig:
        rows, cols = self.size
        if not (4 <= rows <= 16 and 4 <= cols <= 16):
            raise ValueError(f"size must be (rows, cols) with 4 to 16 cells each, got {self.size}")
        most = int(rows * cols * MAX_DENSITY)
        if self.mines > most:
            raise ValueError(f"{self.mines} mines on {rows}x{cols} is too dense: at most {most} (a quarter)")
        return self

    @property
    def turns_needed(self) -> int:
        """The turns the oracle's longest game takes, with room: twice the turns of revealing every safe cell
        ``min(max_actions_per_turn, 6)`` a turn, plus 2. Measured over 20 to 100 seeds at each corner of
        the config (4x4 to 16x16, 1 to 64 mines, 1 to 100 cells a turn), the longest game took at most
        1.6 times those turns on boards of 6x6 and larger and 2 times on 4x4 (16x16 with 64 mines: 36 of
        the 66 turns this allows)."""
        rows, cols = self.size
        per_turn = min(self.max_actions_per_turn, ORACLE_CELLS_PER_TURN)
        return 2 * math.ceil((rows * cols - self.mines) / per_turn) + 2

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else 20 or :attr:`turns_needed` where that is more."""
        return turn_cap(self.max_turns, DEFAULT_MAX_TURNS, self.turns_needed)
