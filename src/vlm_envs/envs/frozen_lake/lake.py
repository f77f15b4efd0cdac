"""FrozenLake's rules, as gymnasium's toy-text FrozenLake has them: the lake, its generation, moves and slips.

A lake is a square of tiles: ``S`` start, ``F`` frozen, ``H`` hole, ``G`` goal (gymnasium's ``desc``
letters). Actions are gymnasium's: 0 Left, 1 Down, 2 Right, 3 Up; a move off the edge leaves the player
where it is. Stepping into a hole or onto the goal ends the episode. On slippery ice a press of action
``a`` moves ``(a - 1) % 4``, ``a`` or ``(a + 1) % 4`` with probabilities ``fail``, ``success_rate``,
``fail`` (``fail = (1 - success_rate) / 2``): one uniform draw per move decides it, as gymnasium's
``categorical_sample`` does.
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

Cell = tuple[int, int]
#: gymnasium's action order and each action's (row, col) step.
LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
STEPS: tuple[Cell, ...] = ((0, -1), (1, 0), (0, 1), (-1, 0))
#: gymnasium's fixed maps (``gymnasium.envs.toy_text.frozen_lake.MAPS``, gymnasium 1.x).
GYMNASIUM_MAPS: dict[str, tuple[str, ...]] = {
    "4x4": ("SFFF", "FHFH", "FFFH", "HFFG"),
    "8x8": (
        "SFFFFFFF",
        "FFFFFFFF",
        "FFFHFFFF",
        "FFFFFHFF",
        "FFFHFFFF",
        "FHHFFFHF",
        "FHFFHFHF",
        "FFFHFFFG",
    ),
}
#: Random draws of a lake before the generator clears a path itself (a lake with few frozen tiles).
MAX_DRAWS = 200


@dataclasses.dataclass(frozen=True)
class Lake:
    """One lake: its rows of ``SFHG`` letters, the start and the goal."""

    rows: tuple[str, ...]
    start: Cell
    goal: Cell

    @property
    def size(self) -> int:
        return len(self.rows)

    def is_hole(self, cell: Cell) -> bool:
        return self.rows[cell[0]][cell[1]] == "H"


def moved(size: int, cell: Cell, direction: int) -> Cell:
    """The cell one step in ``direction``; the same cell at the edge (gymnasium clamps)."""
    dr, dc = STEPS[direction]
    return min(max(cell[0] + dr, 0), size - 1), min(max(cell[1] + dc, 0), size - 1)


def slip_offset(draw: float, success_rate: float) -> int:
    """-1, 0 or +1: how a uniform ``draw`` in [0, 1) turns a press on slippery ice (gymnasium's order)."""
    fail = (1.0 - success_rate) / 2.0
    if draw < fail:
        return -1
    return 0 if draw < fail + success_rate else 1


def shortest_path(lake: Lake, cell: Cell) -> list[int]:
    """A shortest sequence of directions from ``cell`` to the goal that steps on no hole (BFS; ties go to
    gymnasium's lower action index); empty at the goal; a ``ValueError`` when none exists."""
    parent: dict[Cell, tuple[Cell, int] | None] = {cell: None}
    queue = deque([cell])
    while queue:
        at = queue.popleft()
        if at == lake.goal:
            path: list[int] = []
            link = parent[at]
            while link is not None:
                at, direction = link
                path.append(direction)
                link = parent[at]
            return path[::-1]
        for direction in range(4):
            nxt = moved(lake.size, at, direction)
            if nxt not in parent and not lake.is_hole(nxt):
                parent[nxt] = (at, direction)
                queue.append(nxt)
    raise ValueError(f"the goal {lake.goal} cannot be reached from {cell}")


def _distance(holes: np.ndarray, start: Cell, goal: Cell) -> int | None:
    """Moves from ``start`` to ``goal`` over tiles that are not holes (BFS), None when unreachable."""
    size = len(holes)
    free = (~holes).tolist()
    dist = {start: 0}
    queue = deque([start])
    while queue:
        at = queue.popleft()
        if at == goal:
            return dist[at]
        for direction in range(4):
            nxt = moved(size, at, direction)
            if nxt not in dist and free[nxt[0]][nxt[1]]:
                dist[nxt] = dist[at] + 1
                queue.append(nxt)
    return None


def _letters(holes: np.ndarray, start: Cell, goal: Cell) -> tuple[str, ...]:
    grid = np.where(holes, "H", "F").astype("<U1")
    grid[start], grid[goal] = "S", "G"
    return tuple("".join(row) for row in grid)


def _pairs(size: int, min_path: int, corners: bool) -> np.ndarray:
    """Every (start, goal) pair of cell indices at least ``min_path`` steps apart (Manhattan)."""
    if corners:
        return np.array([[0, size * size - 1]])
    r, c = np.divmod(np.arange(size * size), size)
    far = np.abs(r[:, None] - r[None, :]) + np.abs(c[:, None] - c[None, :]) >= max(min_path, 1)
    return np.argwhere(far)


def generate_lake(size: int, frozen_probability: float, corners: bool, min_path: int, seed: int) -> Lake:
    """A lake drawn from ``seed``: each tile frozen with ``frozen_probability`` (gymnasium's ``p``), the
    start and goal in opposite corners (gymnasium's ``generate_random_map``) or anywhere (VAGEN's and
    RAGEN's), the goal reachable without a hole in at least ``min_path`` moves (``min_path <= 2 *
    (size - 1)``). After :data:`MAX_DRAWS` draws without one, the last draw gets a clear L-shaped path."""
    rng = np.random.default_rng([seed, 0xF2051A4E])
    pairs = _pairs(size, min_path, corners)
    for _ in range(MAX_DRAWS):
        holes = rng.random((size, size)) >= frozen_probability
        s, g = (divmod(int(i), size) for i in pairs[int(rng.integers(len(pairs)))])
        holes[s] = holes[g] = False
        distance = _distance(holes, s, g)
        if distance is not None and distance >= min_path:
            return Lake(_letters(holes, s, g), s, g)
    holes[s[0], min(s[1], g[1]) : max(s[1], g[1]) + 1] = False
    holes[min(s[0], g[0]) : max(s[0], g[0]) + 1, g[1]] = False
    return Lake(_letters(holes, s, g), s, g)


def gymnasium_lake(map_name: str) -> Lake:
    """One of gymnasium's fixed maps (start top left, goal bottom right)."""
    rows = GYMNASIUM_MAPS[map_name]
    return Lake(rows, (0, 0), (len(rows) - 1, len(rows) - 1))
