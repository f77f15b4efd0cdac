"""FrozenLake's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    MAX_IMAGE_SIDE,
    ActionsPerTurn,
    EpisodeActions,
    RenderedConfig,
    RenderMode,
    TurnCap,
    turn_cap,
)


class FrozenLakeConfig(RenderedConfig):
    """Everything that defines a FrozenLake episode besides the seed.

    The defaults are VAGEN's FrozenLake (a random 4x4 lake, 80% frozen, start and goal anywhere, not
    slippery, up to 3 actions a reply); ``map_name="4x4"`` or ``"8x8"`` with ``slippery=True`` is
    gymnasium's ``FrozenLake-v1`` / ``FrozenLake8x8-v1``.
    """

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"size": 4, "min_path": 1, "frozen_probability": 0.8},
        "medium": {"size": 6, "min_path": 5, "frozen_probability": 0.8},
        "hard": {"size": 8, "min_path": 9, "frozen_probability": 0.75},
    }

    #: Tiles per side of a random lake.
    size: int = Field(4, ge=2, le=16)
    #: ``random``: a lake drawn from the seed; ``4x4``/``8x8``: gymnasium's fixed maps (then ``size``,
    #: ``frozen_probability``, ``placement`` and ``min_path`` are unused).
    map_name: Literal["random", "4x4", "8x8"] = "random"
    #: Each tile of a random lake is frozen with this probability, else a hole (gymnasium's ``p``).
    frozen_probability: float = Field(0.8, ge=0.0, le=1.0)
    #: ``anywhere``: start and goal on any two tiles (VAGEN, RAGEN); ``corners``: top left and bottom
    #: right (gymnasium's ``generate_random_map``).
    placement: Literal["anywhere", "corners"] = "anywhere"
    #: The goal is at least this many moves from the start.
    min_path: int = Field(1, ge=1, le=30)
    #: Slippery ice (gymnasium's ``is_slippery``): a press moves as intended with ``success_rate``, else
    #: to one of the two perpendicular sides.
    slippery: bool = False
    success_rate: float = Field(1.0 / 3.0, ge=0.0, le=1.0)
    render_mode: RenderMode = "vision"
    max_actions_per_turn: ActionsPerTurn = 3
    #: Moves in the whole episode (gymnasium's ``TimeLimit`` for the 4x4 map).
    max_moves: EpisodeActions = 100
    #: ``None``: ``max_moves`` turns (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Pixels per tile of the image.
    cell_size: int = Field(64, ge=16, le=256)

    @model_validator(mode="after")
    def _check(self) -> FrozenLakeConfig:
        if self.map_name == "random" and self.min_path > 2 * (self.size - 1):
            raise ValueError(f"min_path {self.min_path} exceeds 2 * (size - 1) = {2 * (self.size - 1)}")
        if self.lake_size * self.cell_size > MAX_IMAGE_SIDE:
            raise ValueError(
                f"the image would be {self.lake_size * self.cell_size} px wide (at most {MAX_IMAGE_SIDE})"
            )
        return self

    @property
    def lake_size(self) -> int:
        """Tiles per side of the episode's lake."""
        return self.size if self.map_name == "random" else int(self.map_name[0])

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else ``max_moves`` (at most 1000): malformed replies end too."""
        return turn_cap(self.max_turns, self.max_moves, 0)
