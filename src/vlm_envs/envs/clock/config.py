"""The clock env's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import EnvConfig, TurnCap


class ClockConfig(EnvConfig):
    """Everything that defines a clock episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"minute_step": 5, "numerals": "arabic", "second_hand": False, "question": "read"},
        "medium": {"minute_step": 1, "numerals": "any", "second_hand": True, "question": "read"},
        "hard": {"minute_step": 1, "numerals": "none", "second_hand": True, "question": "later"},
    }

    #: ``read``: what time the clock shows; ``later``: what time it will show some minutes later;
    #: ``any``: either, drawn from the seed.
    question: Literal["read", "later", "any"] = "read"
    #: The time shown is a multiple of this many minutes (a divisor of 60).
    minute_step: int = Field(1, ge=1, le=60)
    #: Numerals on the dial; ``any``: arabic, roman or none, drawn from the seed.
    numerals: Literal["arabic", "roman", "none", "any"] = "arabic"
    #: A red second hand at a random second (a distractor).
    second_hand: bool = False
    #: ``later`` questions add at most this many minutes (a multiple of ``minute_step``, at least one step).
    max_later: int = Field(180, ge=1, le=720)
    #: Replies allowed: a wrong time is answered "not right" and the model may try again.
    max_turns: TurnCap = 2
    #: Side of the (square) image in pixels.
    image_size: int = Field(336, ge=96, le=1024)

    @model_validator(mode="after")
    def _check(self) -> ClockConfig:
        if 60 % self.minute_step:
            raise ValueError(f"minute_step must divide 60, got {self.minute_step}")
        if self.max_later < self.minute_step:
            raise ValueError(f"max_later {self.max_later} is below minute_step {self.minute_step}")
        return self
