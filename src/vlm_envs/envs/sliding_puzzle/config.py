"""SlidingPuzzle's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap


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
    max_turns: TurnCap = 12
    #: Side of a tile in pixels.
    cell_size: int = Field(56, ge=16, le=256)
