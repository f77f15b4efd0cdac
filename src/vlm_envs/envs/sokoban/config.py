"""The Sokoban env's typed config, validated once where it enters (unknown keys are errors).

Names follow the slime example's ``SokobanEnvConfig`` where they overlap (``grid_size`` as
(rows, cols) including the border wall, ``num_boxes``, ``max_steps``, ``render_mode``,
``max_actions_per_step``, ``wall_fraction``, ``text_grid_in_vision``, ``rng_seed`` and
``initial_base_grid`` / ``initial_boxes`` / ``initial_player``), so rows made for it load.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vlm_envs.envs.sokoban.board import Layout, State, from_slime_grid, parse_level
from vlm_envs.envs.sokoban.generator import Difficulty
from vlm_envs.envs.sokoban.render import DEFAULT_CELL_SIZE

RenderMode = Literal["vision", "text", "vision+text"]


def _plain(value: Any) -> Any:
    """numpy arrays / scalars (as parquet rows deliver them) to plain Python lists / numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


#: The most pixels a side of a rendered board may have: above what a Qwen-VL processor keeps
#: (its default ``max_pixels`` is about 3,584 squared), and 50 MB of RGB.
MAX_IMAGE_SIDE = 4096


class SokobanConfig(BaseModel):
    """Everything that defines a Sokoban episode besides the seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grid_size: tuple[int, int] = (6, 6)
    num_boxes: int = Field(1, ge=1)
    wall_fraction: float = Field(0.2, ge=0.0, lt=1.0)
    min_moves: int | None = Field(None, ge=1)
    max_moves: int | None = Field(None, ge=1)
    max_steps: int = Field(100, ge=1)
    max_turns: int | None = Field(None, ge=1)
    max_actions_per_step: int = Field(3, ge=1)
    render_mode: RenderMode = "vision"
    text_grid_in_vision: bool = False
    cell_size: int = Field(DEFAULT_CELL_SIZE, ge=8, le=256)
    level: str | None = None
    initial_base_grid: list[list[int]] | None = None
    initial_boxes: list[list[int]] | None = None
    initial_player: list[int] | None = None
    optimal_moves: int | None = Field(None, ge=0)
    optimal_exact: bool | None = None
    reward_mode: Literal["binary", "shaped"] = "binary"
    success_bonus: float = 1.0
    invalid_format_penalty: float = Field(0.1, ge=0.0)
    solver_max_nodes: int = Field(20_000, ge=1)
    rng_seed: int | None = None

    @field_validator("grid_size", "initial_base_grid", "initial_boxes", "initial_player", mode="before")
    @classmethod
    def _from_numpy(cls, value: Any) -> Any:
        return _plain(value)

    @model_validator(mode="after")
    def _check(self) -> SokobanConfig:
        given = [self.initial_base_grid, self.initial_boxes, self.initial_player]
        if any(v is not None for v in given) and any(v is None for v in given):
            raise ValueError("initial_base_grid, initial_boxes and initial_player must be given together")
        if self.level is not None and given[0] is not None:
            raise ValueError("give either level or initial_base_grid/initial_boxes/initial_player, not both")
        level = self.given_level()  # a malformed level or grid is a config error, raised here
        if level is None:
            self.difficulty()
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

    def difficulty(self) -> Difficulty:
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
    def shows_image(self) -> bool:
        return self.render_mode != "text"

    @property
    def shows_grid(self) -> bool:
        return self.render_mode != "vision" or self.text_grid_in_vision
