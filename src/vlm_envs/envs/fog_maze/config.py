"""FogMaze's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    ActionsPerTurn,
    EpisodeActions,
    RenderedConfig,
    RenderMode,
    TurnCap,
)


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
    #: Actions in the whole episode (blocked ones and turns included).
    max_moves: EpisodeActions = 100
    #: ``None``: ``max_moves`` turns (see :attr:`turn_limit`).
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
        return self

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else ``max_moves``. A turn that plays uses an action, so only replies
        that play none (malformed ones) reach it before the actions run out: it ends a stream of them."""
        return self.max_turns if self.max_turns is not None else self.max_moves
