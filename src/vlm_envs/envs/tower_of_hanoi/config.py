"""Tower of Hanoi's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    ActionsPerTurn,
    RenderedConfig,
    RenderMode,
    TurnCap,
    check_turns_needed,
    turn_cap,
)


class TowerOfHanoiConfig(RenderedConfig):
    """Everything that defines a Tower of Hanoi episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"disks": 3, "min_moves": 2},
        "medium": {"disks": 4, "min_moves": 6},
        "hard": {"disks": 5, "min_moves": 14},
    }

    disks: int = Field(4, ge=1, le=10)
    #: ``random``: each disk on a random peg and a random goal peg; ``classic``: every disk on A, goal C.
    start: Literal["random", "classic"] = "random"
    #: A random start is at least this many moves from solved (at most ``2**disks - 1``).
    min_moves: int = Field(3, ge=1, le=1023)
    render_mode: RenderMode = "vision"
    max_moves_per_turn: ActionsPerTurn = 4
    #: ``None``: twice the turns the longest solution needs (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Width of the image in pixels (its height is two thirds of it).
    image_width: int = Field(384, ge=192, le=1536)

    @model_validator(mode="after")
    def _check(self) -> TowerOfHanoiConfig:
        if self.min_moves > 2**self.disks - 1:
            raise ValueError(f"min_moves {self.min_moves} exceeds 2**disks - 1 = {2**self.disks - 1}")
        check_turns_needed(
            self.turns_needed, f"disks={self.disks} at {self.max_moves_per_turn} move(s) a turn"
        )
        return self

    @property
    def turns_needed(self) -> int:
        """The turns of the longest solution (``2**disks - 1`` moves), ``max_moves_per_turn`` a turn."""
        return math.ceil((2**self.disks - 1) / self.max_moves_per_turn)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else twice the turns of the longest solution (``2**disks - 1``)."""
        return turn_cap(self.max_turns, 2 * self.turns_needed, self.turns_needed)
