"""PolyominoPacking's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import RenderedConfig, RenderMode, TurnCap, turn_cap


class PolyominoPackingConfig(RenderedConfig):
    """Everything that defines a PolyominoPacking episode besides the seed."""

    #: ``difficulty``: the region's shape, the pieces and whether they may be mirrored (medium: the
    #: defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"shape": "rectangle", "pieces": 3, "mirror": False},
        "medium": {"shape": "irregular", "pieces": 5, "mirror": False},
        "hard": {"shape": "irregular", "pieces": 8, "mirror": True},
    }

    #: The region: a rectangle, or an irregular shape grown piece by piece.
    shape: Literal["rectangle", "irregular"] = "irregular"
    #: Pieces to pack (letters A, B, C, ...).
    pieces: int = Field(5, ge=2, le=12)
    #: Cells a piece has, drawn between these.
    min_size: int = Field(3, ge=2, le=6)
    max_size: int = Field(5, ge=2, le=6)
    #: Pieces may be mirrored (flipped over) as well as turned; each is then drawn flipped or not at random.
    mirror: bool = False
    #: ``remove B`` takes a placed piece back (else pieces stay where they are placed).
    removals: bool = True
    render_mode: RenderMode = "vision"
    #: ``None``: two turns a piece (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Side of a board cell in pixels.
    cell_size: int = Field(40, ge=16, le=128)

    @model_validator(mode="after")
    def _check(self) -> PolyominoPackingConfig:
        if self.min_size > self.max_size:
            raise ValueError(f"min_size {self.min_size} exceeds max_size {self.max_size}")
        return self

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else two turns a piece (the oracle places one a turn)."""
        return turn_cap(self.max_turns, 2 * self.pieces, self.pieces)
