"""ClutterCount's typed config: the difficulty knobs, validated once where they enter (unknown keys: errors).

The checks make the generator's guarantees hold by construction: every scene has the two kinds of
distractor the question must resist, and the non-overlapping fallback layout (see
:mod:`~vlm_envs.envs.clutter_count.generator`) always fits, so every seed gives a scene.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.clutter_count.shapes import ColorName, Kind, cell_side
from vlm_envs.envs.config import MAX_TURNS, EnvConfig, RewardTerm, TurnCap

#: Picture sides are multiples of 224 = lcm(28, 32): Qwen2-VL's 28 px and Qwen3-VL's 32 px grids tile it.
SIDE_MULTIPLE = 224
#: The largest picture side: every pixel stays reachable in the 0-1000 frame of ``coords: relative1000``.
MAX_SIDE = 896
#: The most marks an episode may place.
MAX_MARKS = 1000
#: The most objects a picture may hold (each takes a palette entry).
MAX_OBJECTS = 250


class ClutterCountConfig(EnvConfig):
    """Everything that defines a ClutterCount episode besides the seed."""

    #: ``difficulty``: objects, targets, sizes, palette, rotation, overlap, visibility, calls and replies.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "objects": (8, 12),
            "targets": (2, 5),
            "radius": (20, 28),
            "kinds": ("circle", "square", "triangle", "star"),
            "colors": ("red", "blue", "green", "yellow"),
            "rotate": False,
            "overlap": 0.2,
            "min_visible": 0.8,
            "max_mark_calls": 3,
            "max_turns": 4,
        },
        "medium": {
            "objects": (16, 26),
            "targets": (3, 9),
            "radius": (15, 24),
            "kinds": ("circle", "square", "triangle", "star", "diamond"),
            "colors": ("red", "orange", "yellow", "green", "blue", "purple"),
            "rotate": False,
            "overlap": 0.5,
            "min_visible": 0.6,
            "max_mark_calls": 3,
            "max_turns": 4,
        },
        "hard": {
            "objects": (40, 56),
            "targets": (6, 14),
            "radius": (11, 18),
            "kinds": ("circle", "square", "triangle", "star", "diamond", "cross"),
            "colors": ("red", "orange", "pink", "yellow", "green", "teal", "blue", "purple", "brown"),
            "rotate": True,
            "overlap": 0.8,
            "min_visible": 0.45,
            "max_mark_calls": 2,
            "max_turns": 3,
        },
    }

    #: Side of the square picture in px: a multiple of 224, at most 896.
    image_size: int = Field(448, ge=SIDE_MULTIPLE, le=MAX_SIDE)
    #: Least and most objects in the picture (targets and distractors), inclusive.
    objects: tuple[int, int] = (16, 26)
    #: Least and most targets (the answer), inclusive.
    targets: tuple[int, int] = (3, 9)
    #: Least and most object radius in px, inclusive (a star's or triangle's points reach a little further).
    radius: tuple[int, int] = (15, 24)
    #: Shape kinds drawn from (at least two: the question's kind needs others of its colour).
    kinds: tuple[Kind, ...] = ("circle", "square", "triangle", "star", "diamond")
    #: Colours drawn from (at least two: the question's kind needs others of other colours).
    colors: tuple[ColorName, ...] = ("red", "orange", "yellow", "green", "blue", "purple")
    #: Turn every shape by a random whole number of degrees (else upright).
    rotate: bool = False
    #: Share of objects placed overlapping an object already drawn (the rest anywhere).
    overlap: float = Field(0.5, ge=0.0, le=1.0)
    #: Share of its own pixels every object keeps visible (besides its centre, which no object covers).
    min_visible: float = Field(0.6, ge=0.2, le=1.0)
    #: ``mark`` calls allowed (0: no marking tool).
    max_mark_calls: int = Field(3, ge=0, le=MAX_TURNS)
    #: Marks allowed in all (at least the most targets: the reference player marks each once).
    max_marks: int = Field(100, ge=1, le=MAX_MARKS)
    max_turns: TurnCap = 4
    #: The frame of the mark tool's points: picture pixels, or 0-1000 (Qwen3-VL's convention).
    coords: Literal["pixels", "relative1000"] = "pixels"
    #: Added to the reward of a right answer after at least one accepted ``mark`` call (never paid alone).
    tool_bonus: RewardTerm = 0.0

    @model_validator(mode="after")
    def _check(self) -> ClutterCountConfig:
        if self.image_size % SIDE_MULTIPLE:
            raise ValueError(f"image_size must be a multiple of {SIDE_MULTIPLE}, got {self.image_size}")
        kinds, colors = dict.fromkeys(self.kinds), dict.fromkeys(self.colors)
        if len(kinds) < 2 or len(colors) < 2:
            raise ValueError(
                "kinds and colors must each name at least two distinct entries (the question's kind needs "
                f"distractors of its colour and of its shape), got kinds={list(kinds)}, colors={list(colors)}"
            )
        t_lo, t_hi = self.targets
        o_lo, o_hi = self.objects
        if not 1 <= t_lo <= t_hi:
            raise ValueError(f"targets must be a range of at least 1, got {self.targets}")
        if not t_hi + 2 <= o_lo <= o_hi <= MAX_OBJECTS:
            raise ValueError(
                f"objects must be a range up to {MAX_OBJECTS} starting at least 2 above the most targets "
                f"(one distractor of the target's colour and one of its shape), got objects={self.objects}, "
                f"targets={self.targets}"
            )
        r_lo, r_hi = self.radius
        if not 8 <= r_lo <= r_hi <= self.image_size // 8:
            raise ValueError(
                f"radius must be a range within [8, {self.image_size // 8}] (an eighth of image_size), "
                f"got {self.radius}"
            )
        cells = (self.image_size // cell_side(r_hi)) ** 2
        if cells < o_hi:
            raise ValueError(
                f"{o_hi} objects of radius up to {r_hi} do not fit a {self.image_size} px picture side by "
                f"side ({cells} places): lower objects or radius, or raise image_size"
            )
        if self.max_marks < t_hi:
            raise ValueError(
                f"max_marks={self.max_marks} is below the most targets ({t_hi}): every target must be "
                "markable"
            )
        return self

    def palette(self) -> tuple[tuple[Kind, ...], tuple[ColorName, ...]]:
        """The kinds and colours, each once, in the order given."""
        return tuple(dict.fromkeys(self.kinds)), tuple(dict.fromkeys(self.colors))
