"""SpotDifference's typed config: the difficulty knobs, validated once where they enter (unknown keys are
errors). The checks keep every difference visible by construction: cells are at least
:data:`MIN_CELL_PX` wide, so the smallest object still covers more than :data:`MIN_CHANGED_PX` pixels."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import MAX_IMAGE_SIDE, MAX_TURNS, EnvConfig, TurnCap

#: The band left and above the grid that holds its column letters and row numbers (image px).
LABEL_MARGIN = 24
#: The narrowest grid cell (image px): its smallest object keeps well over MIN_CHANGED_PX pixels.
MIN_CELL_PX = 48
#: Every difference changes at least this many pixels of its cell in the image the model sees.
MIN_CHANGED_PX = 64
#: A pixel counts as changed when a channel moves by at least this much (0-255).
MIN_CHANNEL_STEP = 32
#: The smallest zoom box side, in image px: one merged Qwen2-VL patch (14 px x merge 2).
MIN_ZOOM_PX = 28
#: The most cells a side: column letters run A to L.
MAX_GRID = 12


class SpotDifferenceConfig(EnvConfig):
    """Everything that defines a SpotDifference episode besides the seed."""

    #: ``difficulty``: grid, differences, altered copies, subtlety, zooms and replies (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"grid": 3, "differences": (1, 2), "altered": 1, "subtle": False, "max_turns": 4},
        "medium": {"grid": 4, "differences": (3, 3), "altered": 1, "subtle": False, "max_turns": 4},
        "hard": {"grid": 5, "differences": (4, 5), "altered": 2, "subtle": True, "max_turns": 3},
    }

    #: Cells a side of the labelled grid (A1 top left).
    grid: int = Field(4, ge=2, le=MAX_GRID)
    #: The least and most differing cells of an episode (drawn from the seed).
    differences: tuple[int, int] = (3, 3)
    #: Altered copies beside the original: 1 shows two images, 2 three (each difference in one copy).
    altered: int = Field(1, ge=1, le=2)
    #: Small objects, near colours, small moves and resizes.
    subtle: bool = False
    #: Side of each (square) image in px, the label band included.
    image_size: int = Field(448, ge=LABEL_MARGIN + 2 * MIN_CELL_PX, le=MAX_IMAGE_SIDE // 2)
    #: Each crop of a zoom is scaled to fit ``crop_view`` x ``crop_view``.
    crop_view: int = Field(336, ge=112, le=MAX_IMAGE_SIDE // 2)
    max_zooms: int = Field(2, ge=0, le=MAX_TURNS)
    #: Replies allowed; a wrong answer is told how many of its cells are right and may be retried.
    max_turns: TurnCap = 4

    @property
    def cell_px(self) -> int:
        """A grid cell's side in image px."""
        return (self.image_size - LABEL_MARGIN) // self.grid

    @property
    def copies(self) -> int:
        """Images shown: the original and its altered copies."""
        return 1 + self.altered

    @model_validator(mode="after")
    def _check(self) -> SpotDifferenceConfig:
        low, high = self.differences
        if not 1 <= low <= high <= self.grid * self.grid:
            raise ValueError(
                f"differences must be (least, most) with 1 <= least <= most <= {self.grid * self.grid} "
                f"(the cells of a {self.grid}x{self.grid} grid), got {self.differences}"
            )
        if self.cell_px < MIN_CELL_PX:
            raise ValueError(
                f"a {self.grid}x{self.grid} grid in a {self.image_size} px image has {self.cell_px} px "
                f"cells, "
                f"under {MIN_CELL_PX}: raise image_size to at least {LABEL_MARGIN + MIN_CELL_PX * self.grid}"
            )
        return self
