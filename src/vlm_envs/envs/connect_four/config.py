"""Connect Four's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import RenderedConfig, RenderMode, TurnCap, turn_cap
from vlm_envs.envs.connect_four.engine import horizon


class ConnectFourConfig(RenderedConfig):
    """Everything that defines a Connect Four episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"engine_depth": 1, "min_win": 1, "max_win": 2},
        "medium": {"engine_depth": 2, "min_win": 2, "max_win": 2},
        "hard": {"engine_depth": 4, "min_win": 3, "max_win": 3},
    }

    rows: int = Field(6, ge=4, le=8)
    cols: int = Field(7, ge=4, le=9)
    #: Plies the engine searches, its own move the first (see :mod:`vlm_envs.envs.connect_four.engine`).
    engine_depth: int = Field(2, ge=1, le=6)
    #: A start's shortest win against the engine is ``min_win`` to ``max_win`` of your moves.
    min_win: int = Field(2, ge=1, le=4)
    max_win: int = Field(2, ge=1, le=4)
    render_mode: RenderMode = "vision"
    #: ``None``: a turn for every move you could make on an empty board (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Pixels per cell of the image.
    cell_size: int = Field(64, ge=24, le=160)

    @model_validator(mode="after")
    def _check(self) -> ConnectFourConfig:
        if self.min_win > self.max_win:
            raise ValueError(f"min_win {self.min_win} exceeds max_win {self.max_win}")
        if self.max_win > horizon(self.engine_depth):
            least = 2 * self.max_win - 3
            raise ValueError(
                f"max_win {self.max_win} is past the horizon of an engine of depth {self.engine_depth} "
                f"(a start's shortest win is proven by a forced-win search, which holds against the engine "
                f"within (engine_depth + 3) // 2 moves): set engine_depth >= {least} or max_win <= "
                f"{horizon(self.engine_depth)}"
            )
        return self

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else a turn for each of your moves on an empty board (a board
        fills before that, and a win takes at most ``max_win`` moves)."""
        return turn_cap(self.max_turns, (self.rows * self.cols + 1) // 2, self.max_win)
