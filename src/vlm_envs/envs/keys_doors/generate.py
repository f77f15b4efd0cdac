"""KeysDoors' levels drawn from a seed: rooms in a row, a locked door between each two, every key on the
side of its door the player comes from, lava that never cuts the way.

Room ``j``'s cells are rows ``1..h`` and columns ``1 + j * (w + 1)`` onwards (``w`` of them); the column
after a room is the wall to the next, with its door at a random row. The player starts in the first room
and the goal is in the last. The key of door ``i`` lies in one of rooms ``0..i``, so it can be fetched
before the door is needed; distractor keys (colours no door has) lie anywhere. A lava gap is a column of
lava across a room with one gap, never in a room's first or last column (the cells by its doors); scattered
lava avoids the cells by the doors too. A draw that cannot be won (:func:`~.solver.winnable`: scattered
lava cutting the way) is drawn again; after :data:`MAX_DRAWS` the level is drawn without scattered lava,
which always wins (each side of a gap is a rectangle, and the gap joins them).
"""

from __future__ import annotations

import numpy as np

from vlm_envs.envs.keys_doors.solver import DistanceTable, distance_table, winnable
from vlm_envs.envs.keys_doors.world import COLOURS, DOOR, FLOOR, GOAL, LAVA, WALL, Cell, Item, Level

#: Draws of a level before the generator leaves the scattered lava out.
MAX_DRAWS = 40
_SALT = 0x6B3D00


def room_columns(room: int, width: int) -> range:
    """The columns of room ``room``'s cells (rooms ``width`` cells wide)."""
    first = 1 + room * (width + 1)
    return range(first, first + width)


def generate_level(
    rooms: int, room_size: tuple[int, int], distractors: int, lava: int, lava_gaps: int, seed: int
) -> tuple[Level, DistanceTable]:
    """A winnable level drawn from ``seed`` and its solver table (see the module docstring)."""
    rng = np.random.default_rng([seed, _SALT])
    for _ in range(MAX_DRAWS):
        level = draw_level(rng, rooms, room_size, distractors, lava, lava_gaps)
        if winnable(level):
            break
    else:
        level = draw_level(rng, rooms, room_size, distractors, 0, lava_gaps)
    return level, distance_table(level)


def draw_level(
    rng: np.random.Generator, rooms: int, room_size: tuple[int, int], distractors: int, lava: int, gaps: int
) -> Level:
    """One level drawn from ``rng``, winnable or not (:func:`generate_level` keeps the winnable ones)."""
    rows, width = room_size
    grid = np.full((rows + 2, rooms * (width + 1) + 1), WALL, dtype=np.uint8)
    for room in range(rooms):
        grid[1 : rows + 1, room_columns(room, width)] = FLOOR
    colours = [int(c) for c in rng.permutation(len(COLOURS))]
    doors = []
    for room in range(rooms - 1):
        cell = (1 + int(rng.integers(rows)), room_columns(room, width)[-1] + 1)
        grid[cell] = DOOR
        doors.append(Item(cell, colours[room]))
    if width >= 3:
        for room in sorted(int(r) for r in rng.choice(rooms, size=gaps, replace=False)):
            column = room_columns(room, width)[int(rng.integers(1, width - 1))]
            grid[1 : rows + 1, column] = LAVA
            grid[1 + int(rng.integers(rows)), column] = FLOOR
    free = {
        room: [(r, c) for r in range(1, rows + 1) for c in room_columns(room, width) if grid[r, c] == FLOOR]
        for room in range(rooms)
    }

    def take(choices: list[int]) -> Cell:
        spots = free[choices[int(rng.integers(len(choices)))]]
        return spots.pop(int(rng.integers(len(spots))))

    start = take([0])
    goal = take([rooms - 1])
    grid[goal] = GOAL
    keys = [Item(take([r for r in range(door + 1) if free[r]]), colours[door]) for door in range(rooms - 1)]
    for extra in range(distractors):
        keys.append(Item(take([r for r in range(rooms) if free[r]]), colours[rooms - 1 + extra]))
    by_doors = {(door.cell[0], door.cell[1] + side) for door in doors for side in (-1, 1)}
    spots = [cell for room in range(rooms) for cell in free[room] if cell not in by_doors]
    if lava and spots:
        for index in sorted(
            int(i) for i in rng.choice(len(spots), size=min(lava, len(spots)), replace=False)
        ):
            grid[spots[index]] = LAVA
    cells = tuple(tuple(int(v) for v in row) for row in grid)
    return Level(cells, tuple(doors), tuple(keys), start, goal)
