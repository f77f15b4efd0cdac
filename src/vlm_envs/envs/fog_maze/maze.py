"""FogMaze's rules: the maze as a block grid, its generation from a seed, moves and distances.

A maze of ``rows x cols`` cells is a boolean block grid of shape ``(2*rows+1, 2*cols+1)`` (True =
wall): cell ``(r, c)`` is block ``(2r+1, 2c+1)`` and the block between two neighbouring cells is the
wall (or opening) between them. Directions are clockwise, so turning right adds one.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

#: Clockwise directions as (row, col) steps: 0 up (north), 1 right (east), 2 down (south), 3 left (west).
DIRECTIONS = ((-1, 0), (0, 1), (1, 0), (0, -1))
Cell = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Maze:
    """One generated episode: the block grid, the start cell and heading, the goal cell."""

    walls: np.ndarray
    start: Cell
    heading: int
    goal: Cell

    @property
    def rows(self) -> int:
        return self.walls.shape[0] // 2

    @property
    def cols(self) -> int:
        return self.walls.shape[1] // 2


def can_move(walls: np.ndarray, cell: Cell, direction: int) -> bool:
    """Whether the wall between ``cell`` and its neighbour in ``direction`` is open."""
    dr, dc = DIRECTIONS[direction]
    return not walls[2 * cell[0] + 1 + dr, 2 * cell[1] + 1 + dc]


def neighbour(cell: Cell, direction: int) -> Cell:
    dr, dc = DIRECTIONS[direction]
    return cell[0] + dr, cell[1] + dc


def distances(walls: np.ndarray, start: Cell) -> np.ndarray:
    """Moves from ``start`` to every cell (BFS over the four directions); -1 where unreachable."""
    dist = np.full((walls.shape[0] // 2, walls.shape[1] // 2), -1, dtype=np.int64)
    dist[start] = 0
    queue = deque([start])
    while queue:
        cell = queue.popleft()
        for d in range(4):
            if can_move(walls, cell, d):
                nxt = neighbour(cell, d)
                if dist[nxt] < 0:
                    dist[nxt] = dist[cell] + 1
                    queue.append(nxt)
    return dist


def _carve(rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """A perfect maze (a spanning tree of the cells) by an iterative randomized depth-first search."""
    walls = np.ones((2 * rows + 1, 2 * cols + 1), dtype=bool)
    walls[1::2, 1::2] = False
    visited = np.zeros((rows, cols), dtype=bool)
    first = (int(rng.integers(rows)), int(rng.integers(cols)))
    visited[first] = True
    stack = [first]
    while stack:
        cell = stack[-1]
        fresh = [
            d
            for d in range(4)
            if 0 <= (n := neighbour(cell, d))[0] < rows and 0 <= n[1] < cols and not visited[n]
        ]
        if not fresh:
            stack.pop()
            continue
        d = fresh[int(rng.integers(len(fresh)))]
        nxt = neighbour(cell, d)
        walls[2 * cell[0] + 1 + DIRECTIONS[d][0], 2 * cell[1] + 1 + DIRECTIONS[d][1]] = False
        visited[nxt] = True
        stack.append(nxt)
    return walls


def _open_loops(walls: np.ndarray, fraction: float, rng: np.random.Generator) -> None:
    """Knock down ``fraction`` of the remaining inner walls between cells (in place)."""
    inner = walls[1:-1, 1:-1]
    rr, cc = np.nonzero(inner & ((np.indices(inner.shape).sum(axis=0) % 2) == 1))
    count = round(fraction * len(rr))
    if count:
        pick = rng.choice(len(rr), size=count, replace=False)
        walls[rr[pick] + 1, cc[pick] + 1] = False


def generate_maze(rows: int, cols: int, loop_fraction: float, min_distance: int, seed: int) -> Maze:
    """A maze, start, heading and goal drawn from ``seed``; the goal is reachable and at least
    ``min_distance`` moves away (``min_distance <= rows + cols - 2`` always has a solution: the cell
    farthest from a corner is at least that far)."""
    rng = np.random.default_rng([seed, 0xF06A2E])
    walls = _carve(rows, cols, rng)
    _open_loops(walls, loop_fraction, rng)
    start = (int(rng.integers(rows)), int(rng.integers(cols)))
    dist = distances(walls, start)
    far = np.flatnonzero(dist.ravel() >= min_distance)
    if len(far) == 0:
        start = (0, 0)
        dist = distances(walls, start)
        far = np.flatnonzero(dist.ravel() == dist.max())
    goal_index = int(far[int(rng.integers(len(far)))])
    goal = (goal_index // cols, goal_index % cols)
    return Maze(walls=walls, start=start, heading=int(rng.integers(4)), goal=goal)


def layout_ascii(maze: Maze, cell: Cell | None = None, start: bool = True) -> str:
    """The whole maze as text for logs: ``#`` wall, ``.`` floor, ``S`` start (where ``start``), ``G`` goal,
    ``@`` player."""
    chars = np.where(maze.walls, "#", ".").astype("<U1")
    if start:
        chars[2 * maze.start[0] + 1, 2 * maze.start[1] + 1] = "S"
    chars[2 * maze.goal[0] + 1, 2 * maze.goal[1] + 1] = "G"
    if cell is not None:
        chars[2 * cell[0] + 1, 2 * cell[1] + 1] = "@"
    return "\n".join("".join(row) for row in chars)


def apply_action(
    walls: np.ndarray, cell: Cell, heading: int, action: int, view: str
) -> tuple[Cell, int, bool]:
    """One action: the new cell and heading, and whether a wall blocked it.

    ``local``: ``action`` is a direction (the heading is kept). ``first_person``: 0 forward along the
    heading, 1 turn left, 2 turn right.
    """
    if view == "first_person":
        if action == 1:
            return cell, (heading + 3) % 4, False
        if action == 2:
            return cell, (heading + 1) % 4, False
        direction = heading
    else:
        direction = action
    if not can_move(walls, cell, direction):
        return cell, heading, True
    return neighbour(cell, direction), heading, False
