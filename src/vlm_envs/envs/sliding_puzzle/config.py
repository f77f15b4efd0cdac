"""SlidingPuzzle's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap, turn_cap

#: The turn cap of a config that needs no more (:attr:`SlidingPuzzleConfig.turn_limit`).
DEFAULT_MAX_TURNS = 12


class SlidingPuzzleConfig(RenderedConfig):
    """Everything that defines a SlidingPuzzle episode besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"n": 3, "scramble_moves": 6},
        "medium": {"n": 3, "scramble_moves": 16},
        "hard": {"n": 4, "scramble_moves": 24, "max_turns": 16},
    }

    #: Tiles per side: n x n positions, n² - 1 tiles and a gap (3: the 8-puzzle, 4: the 15-puzzle).
    n: int = Field(3, ge=2, le=4)
    #: Length of the random walk from the solved board that scrambles it (the shortest solution is at
    #: most this long).
    scramble_moves: int = Field(16, ge=1, le=80)
    render_mode: RenderMode = "vision"
    max_actions_per_turn: ActionsPerTurn = 4
    #: ``None``: 12 turns, or the turns the longest oracle plan takes where that is more (see
    #: :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Side of a tile in pixels.
    cell_size: int = Field(56, ge=16, le=256)

    @property
    def turns_needed(self) -> int:
        """The turns the oracle's longest episode takes: its plan is never longer than the scramble's
        ``scramble_moves``, played ``max_actions_per_turn`` a turn."""
        return math.ceil(self.scramble_moves / self.max_actions_per_turn)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else 12 or :attr:`turns_needed` where that is more."""
        return turn_cap(self.max_turns, DEFAULT_MAX_TURNS, self.turns_needed)
