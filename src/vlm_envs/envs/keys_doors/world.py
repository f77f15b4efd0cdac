"""KeysDoors' rules: a grid of cells, keys lying on it, and what each action does.

A level is a grid of cells (:data:`WALL`, :data:`FLOOR`, :data:`LAVA`, :data:`GOAL`, :data:`DOOR`) with
the rooms in a row, each joined to the next by one door, locked at the start. ``keys[i]`` opens
``doors[i]`` (the same colour); keys past the doors' count are distractors of colours no door has. A state
is where the player stands, the keys it has picked up and the doors it has opened (bit ``i`` of ``held``
is ``keys[i]``, of ``opened`` ``doors[i]``). Actions: a step up, down, left or right (walls and locked
doors block it; lava ends the game; the goal wins it), ``Pickup`` (the key lying on the player's cell)
and ``Open`` (every locked door next to the player whose key it carries). Keys are kept once used, and a
door once open stays open.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import NamedTuple

import numpy as np

Cell = tuple[int, int]
#: Cell codes of :attr:`Level.cells`.
FLOOR, WALL, LAVA, GOAL, DOOR = range(5)
#: The colours of doors and keys, and their letters in the text map (upper case a door, lower case a key).
#: Green is the goal's and orange the lava's, so neither is a key's.
COLOURS = ("red", "blue", "yellow", "purple", "cyan")
LETTERS = ("R", "B", "Y", "P", "C")
#: Actions by index; the four steps come first.
UP, DOWN, LEFT, RIGHT, PICKUP, OPEN = range(6)
ACTION_NAMES = ("Up", "Down", "Left", "Right", "Pickup", "Open")
STEPS: tuple[Cell, ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))


class Effect(enum.Enum):
    """What one action did."""

    MOVED = "moved"
    WALL = "walked into a wall"
    LOCKED = "walked into a locked door"
    PICKED = "picked up a key"
    NO_KEY = "found no key to pick up"
    OPENED = "opened a door"
    NO_DOOR = "found no door to open"
    LAVA = "stepped into lava"
    GOAL = "reached the goal"

    @property
    def wasted(self) -> bool:
        """Whether the action changed nothing (a blocked step, nothing to pick up or open)."""
        return self in WASTED


#: The effects of actions that change nothing.
WASTED = frozenset({Effect.WALL, Effect.LOCKED, Effect.NO_KEY, Effect.NO_DOOR})


@dataclasses.dataclass(frozen=True)
class Item:
    """A door or a key: where it is and its colour (an index of :data:`COLOURS`)."""

    cell: Cell
    colour: int


@dataclasses.dataclass(frozen=True)
class Level:
    """One generated level."""

    #: Rows of cell codes; the border is walls.
    cells: tuple[tuple[int, ...], ...]
    #: ``doors[i]`` joins room ``i`` to room ``i + 1``.
    doors: tuple[Item, ...]
    #: ``keys[i]`` opens ``doors[i]``; the keys after the doors' count open nothing.
    keys: tuple[Item, ...]
    start: Cell
    goal: Cell

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.cells), len(self.cells[0])

    @functools.cached_property
    def array(self) -> np.ndarray:
        """The cell codes as a numpy array."""
        return np.array(self.cells, dtype=np.uint8)

    @functools.cached_property
    def door_at(self) -> dict[Cell, int]:
        return {door.cell: i for i, door in enumerate(self.doors)}

    @functools.cached_property
    def key_at(self) -> dict[Cell, int]:
        return {key.cell: i for i, key in enumerate(self.keys)}

    @property
    def door_keys(self) -> int:
        """The bits of ``held`` that open doors (the distractors' bits are the rest)."""
        return (1 << len(self.doors)) - 1


class State(NamedTuple):
    """Where the player stands, the keys it holds and the doors it opened (bit masks)."""

    cell: Cell
    held: int = 0
    opened: int = 0


def neighbour(cell: Cell, direction: int) -> Cell:
    dr, dc = STEPS[direction]
    return cell[0] + dr, cell[1] + dc


def openable(level: Level, state: State) -> int:
    """The doors (a bit mask) next to the player that are locked and whose key it holds."""
    found = 0
    for direction in range(4):
        door = level.door_at.get(neighbour(state.cell, direction))
        if door is not None and not state.opened >> door & 1 and state.held >> door & 1:
            found |= 1 << door
    return found


def act(level: Level, state: State, action: int) -> tuple[State, Effect]:
    """The state after ``action`` and what it did; a wasted action leaves the state as it was."""
    cell, held, opened = state
    if action < 4:
        nxt = (cell[0] + STEPS[action][0], cell[1] + STEPS[action][1])
        code = level.cells[nxt[0]][nxt[1]]
        if code == WALL:
            return state, Effect.WALL
        if code == DOOR and not opened >> level.door_at[nxt] & 1:
            return state, Effect.LOCKED
        moved = State(nxt, held, opened)
        if code == LAVA:
            return moved, Effect.LAVA
        return moved, Effect.GOAL if code == GOAL else Effect.MOVED
    if action == PICKUP:
        key = level.key_at.get(cell)
        if key is None or held >> key & 1:
            return state, Effect.NO_KEY
        return State(cell, held | 1 << key, opened), Effect.PICKED
    doors = openable(level, state)
    if not doors:
        return state, Effect.NO_DOOR
    return State(cell, held, opened | doors), Effect.OPENED


def bits(mask: int) -> list[int]:
    """The indices of the set bits of ``mask``, lowest first."""
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def carried(level: Level, held: int) -> list[str]:
    """The colours of the keys held (bits of ``held``), in key order."""
    return [COLOURS[level.keys[i].colour] for i in bits(held)]


def standing_on(level: Level, state: State) -> str | None:
    """What lies under the player besides floor (``the red key``, ``the open blue door``, ``the goal``,
    ``lava``), or None."""
    key = level.key_at.get(state.cell)
    if key is not None and not state.held >> key & 1:
        return f"the {COLOURS[level.keys[key].colour]} key"
    door = level.door_at.get(state.cell)
    if door is not None:
        return f"the open {COLOURS[level.doors[door].colour]} door"
    code = level.cells[state.cell[0]][state.cell[1]]
    return {GOAL: "the goal", LAVA: "lava"}.get(code)
