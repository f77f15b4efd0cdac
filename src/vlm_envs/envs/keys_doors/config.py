"""KeysDoors' typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import (
    MAX_IMAGE_SIDE,
    ActionsPerTurn,
    EpisodeActions,
    RenderedConfig,
    RenderMode,
    TurnCap,
    check_turns_needed,
    turn_cap,
)
from vlm_envs.envs.keys_doors.world import COLOURS

#: The action budget of a level that needs no more (FogMaze's and FrozenLake's), see
#: :attr:`KeysDoorsConfig.action_budget`.
DEFAULT_MAX_ACTIONS = 100


class KeysDoorsConfig(RenderedConfig):
    """Everything that defines a KeysDoors episode besides the seed."""

    #: ``difficulty``: easy is MiniGrid's DoorKey (one locked door, its key on the player's side); medium
    #: three rooms in a row (MultiRoom), a distractor key and some lava (the defaults); hard adds lava gaps
    #: across every room and sees only the 5x5 cells around the player, walls and locked doors hiding what
    #: lies behind them.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {
            "rooms": 2,
            "room_size": (3, 3),
            "distractors": 0,
            "lava": 0,
            "lava_gaps": 0,
            "view": "full",
        },
        "medium": {
            "rooms": 3,
            "room_size": (4, 4),
            "distractors": 1,
            "lava": 2,
            "lava_gaps": 0,
            "view": "full",
        },
        "hard": {
            "rooms": 3,
            "room_size": (5, 5),
            "distractors": 2,
            "lava": 2,
            "lava_gaps": 3,
            "view": "local",
            "view_size": 5,
        },
    }

    #: Rooms in a row, a locked door between each two (``rooms - 1`` doors, each with its key).
    rooms: int = Field(3, ge=1, le=5)
    #: (rows, cols) of each room's cells, 2 to 8 each.
    room_size: tuple[int, int] = (4, 4)
    #: Keys of colours no door has (they open nothing).
    distractors: int = Field(1, ge=0, le=4)
    #: Lava cells scattered over the rooms (as many as fit, never by a door).
    lava: int = Field(2, ge=0, le=40)
    #: Rooms (drawn) crossed by a column of lava with one gap; rooms under 3 cells wide get none.
    lava_gaps: int = Field(0, ge=0, le=5)
    #: ``full``: the whole level; ``local``: the ``view_size`` x ``view_size`` cells around the player, less
    #: what walls and locked doors hide.
    view: Literal["full", "local"] = "full"
    view_size: int = Field(5, ge=1, le=9)
    render_mode: RenderMode = "vision"
    max_actions_per_turn: ActionsPerTurn = 5
    #: Actions in the whole episode (wasted ones included); ``None``: 100, or what the longest level of the
    #: config can need where that is more (:attr:`action_budget`).
    max_actions: EpisodeActions | None = None
    #: ``None``: one turn per action of the budget, at most 1000 (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Pixels per cell of the image.
    cell_size: int = Field(32, ge=8, le=128)

    @model_validator(mode="after")
    def _check(self) -> KeysDoorsConfig:
        rows, cols = self.room_size
        if not (2 <= rows <= 8 and 2 <= cols <= 8):
            raise ValueError(f"room_size must be (rows, cols) with 2 to 8 cells each, got {self.room_size}")
        if self.lava_gaps > self.rooms:
            raise ValueError(f"lava_gaps {self.lava_gaps} exceeds rooms {self.rooms}")
        colours = self.rooms - 1 + self.distractors
        if colours > len(COLOURS):
            raise ValueError(
                f"{self.rooms - 1} doors and {self.distractors} distractors need {colours} colours; "
                f"there are {len(COLOURS)}"
            )
        room = rows * cols - (rows - 1 if self.lava_gaps and cols >= 3 else 0)
        if room < 2 + colours:
            raise ValueError(
                f"a {rows}x{cols} room holds {room} free cells, too few for the start, the goal and "
                f"{colours} keys: make the rooms bigger or the keys fewer"
            )
        if self.view_size % 2 == 0:
            raise ValueError(f"view_size must be odd (the player in the middle), got {self.view_size}")
        if self.grid_shape[1] * self.cell_size > MAX_IMAGE_SIDE:
            raise ValueError(
                f"the image would be {self.grid_shape[1] * self.cell_size} px wide (at most {MAX_IMAGE_SIDE})"
            )
        turns = math.ceil(self.actions_needed / self.max_actions_per_turn)
        check_turns_needed(
            turns, f"{self.rooms} rooms of {rows}x{cols} at {self.max_actions_per_turn} a turn"
        )
        return self

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(rows, cols) of the level's grid, its border walls included."""
        rows, cols = self.room_size
        return rows + 2, self.rooms * (cols + 1) + 1

    @property
    def actions_needed(self) -> int:
        """A bound on the fewest actions any level of the config needs: for each door in turn, walk to its
        key, pick it up, walk next to the door and open it, then walk to the goal; each walk stays within
        the rooms open so far, so it is shorter than their cell count."""
        rows, cols = self.room_size
        open_cells = [(door + 1) * rows * cols + door for door in range(self.rooms)]
        return sum(2 * cells for cells in open_cells[:-1]) + open_cells[-1] - 1

    @property
    def action_budget(self) -> int:
        """The actions of an episode: ``max_actions``, else 100, or :attr:`actions_needed` where that is
        more."""
        if self.max_actions is not None:
            return self.max_actions
        return max(DEFAULT_MAX_ACTIONS, self.actions_needed)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else :attr:`action_budget` (at most 1000). A turn that plays uses an
        action, so only replies that play none (malformed ones) reach it before the actions run out."""
        return turn_cap(self.max_turns, self.action_budget, 0)
