"""Falling blocks' typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import RenderedConfig, RenderMode, TurnCap, turn_cap
from vlm_envs.envs.falling_blocks.generator import LevelSpec

#: Free rows a well keeps over its garbage: room for an upright I (4 rows) to come to rest on the garbage.
FREE_ROWS = 4


class FallingBlocksConfig(RenderedConfig):
    """Everything that defines a falling blocks episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"width": 6, "height": 10, "garbage_rows": 2, "lines": 1, "pieces": 6, "preview": 2},
        "medium": {"width": 8, "height": 12, "garbage_rows": 4, "lines": 2, "pieces": 8, "preview": 2},
        "hard": {"width": 10, "height": 14, "garbage_rows": 6, "lines": 4, "pieces": 10, "preview": 1},
    }

    #: Columns of the well.
    width: int = Field(8, ge=4, le=10)
    #: Rows of the well.
    height: int = Field(12, ge=6, le=20)
    #: Rows at the bottom, each full but for a gap, at the start (at most ``height - 4``).
    garbage_rows: int = Field(4, ge=1, le=16)
    #: Lines to clear to win (at most ``garbage_rows`` and half the ``width``).
    lines: int = Field(2, ge=1, le=5)
    #: Pieces in the sequence: the episode is lost when they run out first (at least ``lines``).
    pieces: int = Field(8, ge=1, le=100)
    #: Pieces after the current one shown in the image and named in the text.
    preview: int = Field(2, ge=0, le=5)
    render_mode: RenderMode = "vision"
    #: ``None``: one turn a piece (``pieces``).
    max_turns: TurnCap | None = None
    #: Pixels a side of a cell of the well.
    cell_size: int = Field(28, ge=16, le=64)

    @model_validator(mode="after")
    def _check(self) -> FallingBlocksConfig:
        if self.garbage_rows > self.height - FREE_ROWS:
            raise ValueError(
                f"garbage_rows {self.garbage_rows} leaves fewer than {FREE_ROWS} free rows in a well "
                f"{self.height} rows high"
            )
        if self.lines > self.garbage_rows:
            raise ValueError(f"lines {self.lines} exceeds garbage_rows {self.garbage_rows}")
        if self.lines > self.width // 2:
            raise ValueError(f"lines {self.lines} exceeds half the width ({self.width // 2})")
        if self.pieces < self.lines:
            raise ValueError(f"pieces {self.pieces} is fewer than lines {self.lines}")
        return self

    def level_spec(self) -> LevelSpec:
        """What the generator builds."""
        return LevelSpec(self.width, self.height, self.garbage_rows, self.lines, self.pieces)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else one turn a piece."""
        return turn_cap(self.max_turns, self.pieces, self.pieces)
