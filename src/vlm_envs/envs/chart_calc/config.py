"""ChartCalc's typed config: the difficulty knobs, validated once where they enter (unknown keys: errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import MAX_GRADE_TIMEOUT, MAX_IMAGE_SIDE, EnvConfig, TurnCap

ChartKind = Literal["bar", "grouped_bar", "line", "pie"]
QuestionKind = Literal["difference", "ratio", "sum", "mean", "percent_change", "which"]

CHART_KINDS: tuple[ChartKind, ...] = ("bar", "grouped_bar", "line", "pie")
QUESTION_KINDS: tuple[QuestionKind, ...] = ("difference", "ratio", "sum", "mean", "percent_change", "which")
#: Image sides are multiples of 224, so Qwen2-VL's 28 px and Qwen3-VL's 32 px grids both tile them exactly.
SIDE_MULTIPLE = 224
DEFAULT_MAX_TURNS = 4
#: Questions each chart kind can ask: a percent change needs time (months on a line, years as series).
APPLICABLE: dict[ChartKind, tuple[QuestionKind, ...]] = {
    "bar": ("difference", "ratio", "sum", "mean", "which"),
    "grouped_bar": ("difference", "ratio", "sum", "mean", "percent_change", "which"),
    "line": ("difference", "ratio", "sum", "mean", "percent_change", "which"),
    "pie": ("difference", "ratio", "sum", "which"),
}


class ChartCalcConfig(EnvConfig):
    """Everything that defines a ChartCalc episode besides the seed."""

    #: ``difficulty``: chart kinds, categories and series, questions, replies (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "kinds": ("bar", "pie"),
            "categories": (3, 4),
            "questions": ("difference", "sum", "which"),
            "max_turns": DEFAULT_MAX_TURNS,
        },
        "medium": {
            "kinds": CHART_KINDS,
            "categories": (4, 6),
            "series": (2, 3),
            "questions": QUESTION_KINDS,
            "max_turns": DEFAULT_MAX_TURNS,
        },
        "hard": {
            "kinds": ("grouped_bar", "line"),
            "categories": (6, 8),
            "series": (3, 4),
            "questions": ("ratio", "mean", "percent_change"),
            "max_turns": 3,
        },
    }

    #: Chart kinds drawn from (uniformly).
    kinds: tuple[ChartKind, ...] = CHART_KINDS
    #: Least and most categories (bars, points, slices), inclusive.
    categories: tuple[int, int] = (4, 6)
    #: Least and most series of a grouped bar chart, inclusive (other kinds have one).
    series: tuple[int, int] = (2, 3)
    #: Question templates drawn from (among those that fit the chart).
    questions: tuple[QuestionKind, ...] = QUESTION_KINDS
    #: Image width and height in px (multiples of 224, 448 to :data:`MAX_IMAGE_SIDE`).
    image_size: tuple[int, int] = (672, 448)
    max_turns: TurnCap = DEFAULT_MAX_TURNS
    #: Accepted absolute error of a numeric answer; ``None``: exact at the rounding the question states.
    tolerance: float | None = Field(None, ge=0)
    #: Seconds allowed to check one answer (the library's bounded checker).
    grade_timeout: float | None = Field(None, gt=0, le=MAX_GRADE_TIMEOUT)

    @model_validator(mode="after")
    def _check(self) -> ChartCalcConfig:
        if not self.kinds or not self.questions:
            raise ValueError("kinds and questions must each name at least one entry")
        unasked = [k for k in dict.fromkeys(self.kinds) if not set(APPLICABLE[k]) & set(self.questions)]
        if unasked:
            asks = "; ".join(f"{k} asks {', '.join(APPLICABLE[k])}" for k in unasked)
            raise ValueError(f"no question of {list(self.questions)} fits a {unasked[0]} chart ({asks})")
        lo, hi = self.categories
        if not 3 <= lo <= hi <= 8:
            raise ValueError(f"categories must be a range within [3, 8], got {self.categories}")
        lo, hi = self.series
        if not 2 <= lo <= hi <= 4:
            raise ValueError(f"series must be a range within [2, 4], got {self.series}")
        width, height = self.image_size
        sides_fit = all(
            448 <= side <= MAX_IMAGE_SIDE and not side % SIDE_MULTIPLE for side in (width, height)
        )
        if not sides_fit:
            raise ValueError(
                f"image_size sides must be multiples of {SIDE_MULTIPLE} from 448 to {MAX_IMAGE_SIDE}, "
                f"got {self.image_size}"
            )
        return self
