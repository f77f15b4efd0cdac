"""The Sokoban env's typed config, validated once where it enters (unknown keys are errors).

Names follow the slime example's ``SokobanEnvConfig`` where they overlap (``grid_size`` as
(rows, cols) including the border wall, ``num_boxes``, ``max_steps``, ``render_mode``,
``max_actions_per_step``, ``wall_fraction``, ``text_grid_in_vision``, ``rng_seed`` and
``initial_base_grid`` / ``initial_boxes`` / ``initial_player``), so rows made for it load.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    MAX_EPISODE_ACTIONS,
    MAX_IMAGE_SIDE,
    ActionsPerTurn,
    EpisodeActions,
    RenderedConfig,
    RenderMode,
    RewardTerm,
    TurnCap,
    turn_cap,
)
from vlm_envs.envs.sokoban.board import Layout, State, from_slime_grid, parse_level
from vlm_envs.envs.sokoban.generator import MAX_BOXES, Difficulty
from vlm_envs.envs.sokoban.render import DEFAULT_CELL_SIZE
from vlm_envs.protocol import SEED_LIMIT

#: The most nodes the solver may expand for one level: a node costs a walk over the board.
MAX_SOLVER_NODES = 1_000_000


class SokobanConfig(RenderedConfig):
    """Everything that defines a Sokoban episode besides the seed."""

    #: ``difficulty``: the board, its boxes and the least optimal length (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"grid_size": (5, 5), "num_boxes": 1},
        "medium": {"grid_size": (6, 6), "num_boxes": 1},
        "hard": {"grid_size": (8, 8), "num_boxes": 2, "min_moves": 12},
    }

    grid_size: tuple[int, int] = (6, 6)
    num_boxes: int = Field(1, ge=1, le=MAX_BOXES)
    wall_fraction: float = Field(0.2, ge=0.0, lt=1.0)
    min_moves: EpisodeActions | None = None
    max_moves: EpisodeActions | None = None
    max_steps: EpisodeActions = 100
    #: ``None``: ``max_steps`` turns (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    max_actions_per_step: ActionsPerTurn = 3
    render_mode: RenderMode = "vision"
    text_grid_in_vision: bool = False
    cell_size: int = Field(DEFAULT_CELL_SIZE, ge=8, le=256)
    level: str | None = None
    initial_base_grid: list[list[int]] | None = None
    initial_boxes: list[list[int]] | None = None
    initial_player: list[int] | None = None
    optimal_moves: int | None = Field(None, ge=0, le=MAX_EPISODE_ACTIONS)
    optimal_exact: bool | None = None
    reward_mode: Literal["binary", "shaped"] = "binary"
    success_bonus: RewardTerm = 1.0
    invalid_format_penalty: RewardTerm = 0.1
    solver_max_nodes: int = Field(20_000, ge=1, le=MAX_SOLVER_NODES)
    rng_seed: int | None = Field(None, ge=0, lt=SEED_LIMIT)

    @model_validator(mode="after")
    def _check(self) -> SokobanConfig:
        given = [self.initial_base_grid, self.initial_boxes, self.initial_player]
        if any(v is not None for v in given) and any(v is None for v in given):
            raise ValueError("initial_base_grid, initial_boxes and initial_player must be given together")
        if self.level is not None and given[0] is not None:
            raise ValueError("give either level or initial_base_grid/initial_boxes/initial_player, not both")
        level = self.given_level()  # a malformed level or grid is a config error, raised here
        if level is None:
            self.generator_params()
            rows, cols = self.grid_size
        else:
            rows, cols = level[0].rows, level[0].cols
        side = max(rows, cols) * self.cell_size
        if self.shows_image and side > MAX_IMAGE_SIDE:
            raise ValueError(
                f"a {rows}x{cols} board at cell_size={self.cell_size} renders {side} pixels a side, over "
                f"{MAX_IMAGE_SIDE}: lower cell_size or the board"
            )
        return self

    def given_level(self) -> tuple[Layout, State] | None:
        """The fixed level, if the config names one (``level`` or the slime grid keys)."""
        if self.level is not None:
            return parse_level(self.level)
        if self.initial_base_grid is not None:
            return from_slime_grid(
                self.initial_base_grid, self.initial_boxes or [], self.initial_player or []
            )
        return None

    def generator_params(self) -> Difficulty:
        """The generator's parameters."""
        return Difficulty(
            rows=self.grid_size[0],
            cols=self.grid_size[1],
            num_boxes=self.num_boxes,
            wall_fraction=self.wall_fraction,
            min_moves=self.min_moves,
            max_moves=self.max_moves,
            solver_max_nodes=self.solver_max_nodes,
        )

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else ``max_steps`` (at most 1000). A turn that plays uses a move, so
        only replies that play none (malformed ones) reach it before the moves run out: it ends a stream of
        them."""
        return turn_cap(self.max_turns, self.max_steps, 0)

    @property
    def shows_text(self) -> bool:
        """Whether observations carry the board as text (in ``vision`` mode with ``text_grid_in_vision``)."""
        return self.render_mode != "vision" or self.text_grid_in_vision
