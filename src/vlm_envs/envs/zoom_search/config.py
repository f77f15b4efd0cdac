"""ZoomSearch's typed config: the difficulty knobs, validated once where they enter (unknown keys are errors).

The checks make the glyph-size guarantee hold by construction: the code's glyphs are at most
:data:`MAX_VIEW_GLYPH_PX` high in the first view and at least :data:`MIN_CROP_GLYPH_PX` high in the
tool's crop of the object's box.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import MAX_IMAGE_SIDE, MAX_TURNS, EnvConfig, RewardTerm, TurnCap
from vlm_envs.envs.zoom_search.glyphs import ALPHABET, glyph_font

#: View sides are multiples of 224 = lcm(28, 32): Qwen2-VL's 28 px and Qwen3-VL's 32 px grids both tile
#: the view exactly, so the frame the model sees is the frame the tool's coordinates refer to.
VIEW_MULTIPLE = 224
#: The smallest zoom box side, in view pixels: one merged Qwen2-VL patch (14 px x merge 2).
MIN_ZOOM_PX = 28
#: In the first view the code is unreadable: glyphs at most this high (px).
MAX_VIEW_GLYPH_PX = 4
#: In the crop of the object's box the code is readable: glyphs at least this high (px).
MIN_CROP_GLYPH_PX = 14
#: Space kept free between neighbouring objects' cells, in canvas px.
CELL_GAP = 32
#: The largest canvas side: the canvas is drawn whole, one byte a pixel (64 MiB at 8192).
MAX_CANVAS = 8192


class ZoomSearchConfig(EnvConfig):
    """Everything that defines a ZoomSearch episode besides the seed."""

    #: ``difficulty``: canvas, objects, code length, zooms and replies (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "canvas": 2688,
            "glyph_px": 12,
            "distractors": 10,
            "code_length": 3,
            "max_zooms": 6,
            "max_turns": 8,
        },
        "medium": {
            "canvas": 3584,
            "glyph_px": 14,
            "distractors": 40,
            "code_length": 4,
            "max_zooms": 4,
            "max_turns": 6,
        },
        "hard": {
            "canvas": 3584,
            "glyph_px": 14,
            "distractors": 48,
            "code_length": 5,
            "max_zooms": 2,
            "max_turns": 3,
        },
    }

    #: Side of the square canvas in px; an integer multiple (>= 2) of ``view``.
    canvas: int = Field(3584, ge=2 * VIEW_MULTIPLE, le=MAX_CANVAS)
    #: Side of the first observation (the whole canvas scaled down), a multiple of 224.
    view: int = Field(896, ge=VIEW_MULTIPLE, le=MAX_IMAGE_SIDE)
    #: The tool's crop is scaled to fit a ``crop_view`` x ``crop_view`` box.
    crop_view: int = Field(448, ge=112, le=MAX_IMAGE_SIDE)
    #: Objects besides the target.
    distractors: int = Field(40, ge=0)
    #: Height of the code's glyphs (cap height) on the canvas, in px.
    glyph_px: int = Field(14, ge=8, le=64)
    code_length: int = Field(4, ge=3, le=6)
    max_zooms: int = Field(4, ge=0, le=MAX_TURNS)
    max_turns: TurnCap = 6
    #: The frame of the zoom tool's ``bbox``: view pixels, or 0-1000 (Qwen3-VL's convention).
    coords: Literal["pixels", "relative1000"] = "pixels"
    #: Added to the reward of a correct answer that used at least one zoom (never paid alone).
    tool_bonus: RewardTerm = 0.0

    @property
    def scale(self) -> int:
        """Canvas pixels per view pixel."""
        return self.canvas // self.view

    def box_range(self) -> tuple[int, int]:
        """Least and most object box side on the canvas, multiples of :attr:`scale`."""
        _, ink, plate_width = glyph_font(self.glyph_px, self.code_length)
        most = ink * self.crop_view // MIN_CROP_GLYPH_PX // self.scale * self.scale
        least = max(MIN_ZOOM_PX * self.scale, -(-(plate_width * 2) // self.scale) * self.scale)
        return least, most

    def grid(self) -> int:
        """Cells per canvas side; each object sits in its own cell."""
        return self.canvas // (self.box_range()[1] + CELL_GAP)

    @model_validator(mode="after")
    def _check(self) -> ZoomSearchConfig:
        if self.view % VIEW_MULTIPLE or self.canvas % self.view or self.scale < 2:
            raise ValueError(
                f"view must be a multiple of {VIEW_MULTIPLE} and canvas an integer multiple (>= 2) of it, "
                f"got canvas={self.canvas}, view={self.view}"
            )
        if self.glyph_px > MAX_VIEW_GLYPH_PX * self.scale:
            raise ValueError(
                f"glyph_px={self.glyph_px} would be over {MAX_VIEW_GLYPH_PX} px high in the view "
                f"(scale {self.scale}); use at most {MAX_VIEW_GLYPH_PX * self.scale}"
            )
        codes = len(ALPHABET) ** self.code_length
        if codes < self.distractors + 1:
            raise ValueError(
                f"{self.distractors + 1} objects need distinct codes, and {self.code_length}-character codes "
                f"give {codes}: lower distractors or raise code_length"
            )
        least, most = self.box_range()
        if least > most:
            raise ValueError(
                f"no object size keeps the code at least {MIN_CROP_GLYPH_PX} px high in a "
                f"{self.crop_view} px crop while boxes are at least {least} px: raise glyph_px or crop_view"
            )
        if self.grid() ** 2 < self.distractors + 1:
            raise ValueError(
                f"{self.distractors + 1} objects do not fit a {self.canvas} px canvas "
                f"({self.grid() ** 2} cells of {most + CELL_GAP} px): lower distractors or raise canvas"
            )
        return self
