"""ChartCalc's typed config: the difficulty knobs, validated once where they enter (unknown keys: errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ChartKind = Literal["bar", "grouped_bar", "line", "pie"]
QuestionKind = Literal["difference", "ratio", "sum", "mean", "percent_change", "which"]

CHART_KINDS: tuple[ChartKind, ...] = ("bar", "grouped_bar", "line", "pie")
QUESTION_KINDS: tuple[QuestionKind, ...] = ("difference", "ratio", "sum", "mean", "percent_change", "which")
#: Image sides are multiples of 224, so Qwen2-VL's 28 px and Qwen3-VL's 32 px grids both tile them exactly.
SIDE_MULTIPLE = 224
DEFAULT_MAX_TURNS = 4


class ChartCalcConfig(BaseModel):
    """Everything that defines a ChartCalc episode besides the seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Chart kinds drawn from (uniformly).
    kinds: tuple[ChartKind, ...] = CHART_KINDS
    #: Least and most categories (bars, points, slices), inclusive.
    categories: tuple[int, int] = (4, 6)
    #: Least and most series of a grouped bar chart, inclusive (other kinds have one).
    series: tuple[int, int] = (2, 3)
    #: Question templates drawn from (among those that fit the chart).
    questions: tuple[QuestionKind, ...] = QUESTION_KINDS
    #: Image width and height in px (multiples of 224).
    image_size: tuple[int, int] = (672, 448)
    max_turns: int = Field(DEFAULT_MAX_TURNS, ge=1)
    #: Accepted absolute error of a numeric answer; ``None``: exact at the rounding the question states.
    tolerance: float | None = Field(None, ge=0)
    #: Seconds allowed to check one answer (the library's bounded checker).
    grade_timeout: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> ChartCalcConfig:
        if not self.kinds or not self.questions:
            raise ValueError("kinds and questions must each name at least one entry")
        lo, hi = self.categories
        if not 3 <= lo <= hi <= 8:
            raise ValueError(f"categories must be a range within [3, 8], got {self.categories}")
        lo, hi = self.series
        if not 2 <= lo <= hi <= 4:
            raise ValueError(f"series must be a range within [2, 4], got {self.series}")
        width, height = self.image_size
        if width % SIDE_MULTIPLE or height % SIDE_MULTIPLE or min(width, height) < 448:
            raise ValueError(
                f"image_size sides must be multiples of {SIDE_MULTIPLE} and >= 448, got {self.image_size}"
            )
        return self
