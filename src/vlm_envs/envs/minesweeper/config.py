"""Minesweeper's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap

#: The densest field allowed: past a quarter of the cells, fields need many hints to avoid guessing.
MAX_DENSITY = 0.25


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
    max_turns: TurnCap = 20
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
