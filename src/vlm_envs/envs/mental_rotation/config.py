"""MentalRotation's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import ActionsPerTurn, EnvConfig, TurnCap


class MentalRotationConfig(EnvConfig):
    """Everything that defines a MentalRotation episode besides the seed."""

    #: ``difficulty``: cubes in the shape, quarter turns from the target, replies (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"min_cubes": 4, "max_cubes": 5, "min_turns": 1, "max_turns": 6},
        "medium": {"min_cubes": 5, "max_cubes": 8, "min_turns": 1, "max_turns": 4},
        "hard": {"min_cubes": 8, "max_cubes": 12, "min_turns": 2, "max_turns": 2},
    }

    #: ``rotate``: turn the current view until it matches the target; ``mirror``: one reply, same or mirror.
    mode: Literal["rotate", "mirror"] = "rotate"
    min_cubes: int = Field(5, ge=2, le=12)
    max_cubes: int = Field(8, ge=2, le=12)
    #: ``rotate``: the start is at least this many quarter turns from the target (the most is 3).
    min_turns: int = Field(1, ge=1, le=3)
    max_actions_per_turn: ActionsPerTurn = 3
    max_turns: TurnCap = 4
    #: Side of each view in pixels.
    image_size: int = Field(224, ge=64, le=1024)

    @model_validator(mode="after")
    def _check(self) -> MentalRotationConfig:
        if self.min_cubes > self.max_cubes:
            raise ValueError(f"min_cubes {self.min_cubes} exceeds max_cubes {self.max_cubes}")
        if self.mode == "mirror" and self.max_cubes < 4:
            raise ValueError("mode 'mirror' needs chiral shapes: max_cubes must be at least 4")
        return self
