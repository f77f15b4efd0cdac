"""FrameOrder's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, model_validator

from vlm_envs.envs.config import EnvConfig, TurnCap
from vlm_envs.envs.frame_order.motion import RADII, WORLD

#: The most a frame's move of one object may be (speed times ticks): a quarter of the box, so consecutive
#: frames stay recognisably close.
MAX_FRAME_MOVE = WORLD // 4
#: How far two objects must be able to close in on each other over the animation for a collision to be
#: aimed: twice the widest contact distance (two objects of the largest size, 2 units apart).
COLLISION_TRAVEL = 2 * (2 * RADII[1] + 2)


class FrameOrderConfig(EnvConfig):
    """Everything that defines a FrameOrder episode besides the seed."""

    #: ``difficulty``: frames, objects, how far they move between frames, collisions, how clearly the
    #: true order beats the others, answers (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "frames": 4,
            "objects": 2,
            "min_speed": 3,
            "max_speed": 5,
            "ticks_per_frame": 6,
            "min_collisions": 0,
            "min_gap": 16,
            "max_turns": 3,
        },
        "medium": {
            "frames": 6,
            "objects": 3,
            "min_speed": 2,
            "max_speed": 4,
            "ticks_per_frame": 5,
            "min_collisions": 0,
            "min_gap": 10,
            "max_turns": 3,
        },
        "hard": {
            "frames": 8,
            "objects": 5,
            "min_speed": 2,
            "max_speed": 4,
            "ticks_per_frame": 4,
            "min_collisions": 1,
            "min_gap": 6,
            "max_turns": 4,
        },
    }

    #: Frames shown (letters A, B, ...), the first one named in the text.
    frames: int = Field(6, ge=3, le=8)
    #: Objects in the box, each of its own colour.
    objects: int = Field(3, ge=1, le=6)
    #: Each object's speed, across plus up-down, in world units a tick (the box is 160 units wide).
    min_speed: int = Field(2, ge=1, le=8)
    max_speed: int = Field(4, ge=1, le=8)
    #: Ticks of the simulation between two frames.
    ticks_per_frame: int = Field(5, ge=1, le=10)
    #: The objects collide with each other at least this many times (at most ``objects // 2``).
    min_collisions: int = Field(0, ge=0, le=3)
    #: Every order but the true one moves the objects at least this many units more in all (see
    #: :mod:`vlm_envs.envs.frame_order.order`); at most half of one frame's least move of all objects.
    min_gap: int = Field(10, ge=1, le=120)
    #: Answers the model may give: a wrong order is answered with how many frames are in place.
    max_turns: TurnCap = 3
    #: Side of each frame's box in pixels (its letter is drawn in a band above).
    frame_size: int = Field(160, ge=64, le=512)

    @property
    def least_frame_move(self) -> int:
        """The least all objects together move between two frames without a bounce (units)."""
        return self.objects * self.min_speed * self.ticks_per_frame

    @model_validator(mode="after")
    def _check(self) -> FrameOrderConfig:
        if self.min_speed > self.max_speed:
            raise ValueError(f"min_speed {self.min_speed} exceeds max_speed {self.max_speed}")
        if self.max_speed * self.ticks_per_frame > MAX_FRAME_MOVE:
            raise ValueError(
                f"max_speed {self.max_speed} x ticks_per_frame {self.ticks_per_frame} moves an object more "
                f"than {MAX_FRAME_MOVE} units (a quarter of the box) between frames"
            )
        if self.min_collisions > self.objects // 2:
            raise ValueError(
                f"min_collisions {self.min_collisions} needs {2 * self.min_collisions} objects, "
                f"got {self.objects}"
            )
        travel = 2 * self.max_speed * (self.frames - 1) * self.ticks_per_frame
        if self.min_collisions and travel < COLLISION_TRAVEL:
            raise ValueError(
                f"min_collisions needs objects that can close {COLLISION_TRAVEL} units on each other; at "
                f"max_speed {self.max_speed} over {self.frames} frames of {self.ticks_per_frame} ticks they "
                f"close at most {travel}"
            )
        most = max(1, self.least_frame_move // 2)
        if self.min_gap > most:
            raise ValueError(
                f"min_gap {self.min_gap} is over {most}: half of what {self.objects} objects at min_speed "
                f"{self.min_speed} move in {self.ticks_per_frame} ticks"
            )
        return self
