"""Rush Hour's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap


class RushHourConfig(RenderedConfig):
    """Everything that defines a Rush Hour episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"vehicles": 15, "min_moves": 2, "max_moves": 3, "max_turns": 20},
        "medium": {"vehicles": 15, "min_moves": 4, "max_moves": 8},
        "hard": {"vehicles": 16, "min_moves": 7, "max_moves": 20, "max_turns": 14, "max_search": 40_000},
    }

    #: Cells per side of the board.
    size: int = Field(6, ge=5, le=8)
    #: Vehicles to place, the red car included (fewer when no more fit).
    vehicles: int = Field(15, ge=1, le=24)
    #: The shortest solution of a level takes min_moves to max_moves moves (fewer only when the
    #: generator's draws find no such level within their budget; see the generator).
    min_moves: int = Field(4, ge=1, le=60)
    max_moves: int = Field(8, ge=1, le=60)
    #: Positions the generator may search for one level, all its draws together (the bound on a reset's
    #: time).
    max_search: int = Field(6000, ge=100, le=200_000)
    render_mode: RenderMode = "vision"
    max_actions_per_turn: ActionsPerTurn = 3
    max_turns: TurnCap = 10
    #: Side of a cell in pixels.
    cell_size: int = Field(48, ge=16, le=256)

    @model_validator(mode="after")
    def _check(self) -> RushHourConfig:
        if self.min_moves > self.max_moves:
            raise ValueError(f"min_moves {self.min_moves} exceeds max_moves {self.max_moves}")
        return self
