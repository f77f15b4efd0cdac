"""FogMaze's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    ActionsPerTurn,
    EpisodeActions,
    RenderedConfig,
    RenderMode,
    TurnCap,
    check_turns_needed,
    turn_cap,
)

#: The action budget of a maze that needs no more (:attr:`FogMazeConfig.move_budget`).
DEFAULT_MAX_MOVES = 100


class FogMazeConfig(RenderedConfig):
    """Everything that defines a FogMaze episode besides the seed."""

    #: ``difficulty``: the maze, how far the goal is, how much the fog hides, the move budget (medium: the
    #: defaults). Hard's mazes need at most 87 moves over seeds 0-299, well inside its 150.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"size": (5, 5), "min_distance": 4, "view_size": 5},
        "medium": {"size": (9, 9), "min_distance": 8, "view_size": 3},
        "hard": {
            "size": (13, 13),
            "min_distance": 18,
            "view_size": 3,
            "loop_fraction": 0.05,
            "max_moves": 150,
        },
    }

    #: (rows, cols) in cells.
    size: tuple[int, int] = (9, 9)
    #: Fraction of the perfect maze's inner walls knocked down to make loops.
    loop_fraction: float = Field(0.1, ge=0.0, le=1.0)
    #: The goal is at least this many moves (cell steps) from the start.
    min_distance: int = Field(8, ge=1)
    view: Literal["local", "first_person"] = "local"
    #: ``local`` view: the k x k cells around the player (odd k).
    view_size: int = Field(3, ge=1, le=9)
    render_mode: RenderMode = "vision"
    max_actions_per_turn: ActionsPerTurn = 4
    #: Actions in the whole episode (blocked ones and turns included); ``None``: 100, or the actions the
    #: longest shortest path of the maze's size takes where that is more (see :attr:`move_budget`).
    max_moves: EpisodeActions | None = None
    #: ``None``: one turn per action of the budget, at most 1000 (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: ``local`` image: pixels per cell.
    cell_size: int = Field(48, ge=8, le=256)
    #: ``first_person`` image: (width, height) in pixels.
    image_size: tuple[int, int] = (256, 192)

    @model_validator(mode="after")
    def _check(self) -> FogMazeConfig:
        rows, cols = self.size
        if not (2 <= rows <= 40 and 2 <= cols <= 40):
            raise ValueError(f"size must be (rows, cols) with 2 to 40 cells each, got {self.size}")
        if self.min_distance > rows + cols - 2:
            raise ValueError(f"min_distance {self.min_distance} exceeds rows + cols - 2 = {rows + cols - 2}")
        if self.view_size % 2 == 0:
            raise ValueError(f"view_size must be odd (the player in the middle), got {self.view_size}")
        if self.view == "first_person" and self.render_mode != "vision":
            raise ValueError("view 'first_person' is an image only: use render_mode 'vision'")
        width, height = self.image_size
        if not (32 <= width <= 1024 and 32 <= height <= 1024):
            raise ValueError(f"image_size must be 32 to 1024 pixels each way, got {self.image_size}")
        turns = math.ceil(self.actions_needed / self.max_actions_per_turn)
        check_turns_needed(turns, f"a {rows}x{cols} maze at {self.max_actions_per_turn} action(s) a turn")
        return self

    @property
    def actions_needed(self) -> int:
        """The actions of the longest shortest path a maze of this size can have: a path visits each cell
        once (``rows * cols - 1`` steps); in ``first_person`` each step may need a turn first, and the
        first step two."""
        steps = self.size[0] * self.size[1] - 1
        return 2 * steps + 1 if self.view == "first_person" else steps

    @property
    def move_budget(self) -> int:
        """The actions of an episode: ``max_moves``, else 100 or :attr:`actions_needed` where that is more."""
        if self.max_moves is not None:
            return self.max_moves
        return max(DEFAULT_MAX_MOVES, self.actions_needed)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else :attr:`move_budget` (at most 1000). A turn that plays uses an
        action, so only replies that play none (malformed ones) reach it before the actions run out: it
        ends a stream of them."""
        return turn_cap(self.max_turns, self.move_budget, 0)
