"""ImageProbe's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from vlm_envs.envs.config import MAX_TURNS, EnvConfig, TurnCap

#: The colours a probe image may show, in the order of their option letters (A, B, ...).
COLORS = (
    ("red", (220, 30, 30)),
    ("blue", (30, 60, 220)),
    ("green", (30, 170, 60)),
    ("yellow", (235, 215, 40)),
    ("black", (15, 15, 15)),
    ("white", (245, 245, 245)),
)


class ImageProbeConfig(EnvConfig):
    """Everything that defines an ImageProbe episode besides the seed."""

    #: More colours make chance lower, more turns make more later-turn images to lose.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"choices": 2, "questions": 2},
        "medium": {"choices": 3, "questions": 3},
        "hard": {"choices": 6, "questions": 5},
    }

    #: Questions in an episode, one per reply (each turn shows a new image).
    questions: int = Field(3, ge=1, le=MAX_TURNS)
    #: Replies before the episode is truncated (a trainer's turn cap; above ``questions`` it never cuts).
    max_turns: TurnCap = 8
    #: How many colours each image is drawn from (chance is 1 / choices).
    choices: int = Field(2, ge=2, le=len(COLORS))
    #: Side of each image in pixels.
    image_size: int = Field(56, ge=28, le=1024)
