"""Rush Hour levels: every one solvable, with its shortest solution length known for every position.

A level is drawn as vehicles placed at random around the red car already at the exit; every position
reachable from there (its connected component, at most :data:`MAX_STATES` of them, since moves can be undone)
gets its distance to the nearest solved position by a breadth-first search from all solved ones. The start
is a position of that component as far from solved as allowed: ``min_moves`` to ``max_moves`` moves.
Draws whose component is too big or too shallow are redrawn, up to :data:`ATTEMPTS` draws and
``max_search`` positions searched in all (a bound on the time a reset takes); then the deepest start
found is taken (at least one move from solved).
"""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

from vlm_envs.envs.rush_hour.board import MASK, Layout, Position, Vehicle, exit_row

#: The most positions one level's search may visit.
MAX_STATES = 800
#: Draws before the deepest start found is taken.
ATTEMPTS = 40


@dataclasses.dataclass(frozen=True)
class Level:
    layout: Layout
    start: Position
    #: Every position of the start's component (packed, :meth:`Layout.pack`) -> fewest moves to solve it.
    distance: dict[int, int]
    attempt: int

    @property
    def optimal_moves(self) -> int:
        return self.distance[self.layout.pack(self.start)]


def _place(n: int, vehicles: int, rng: np.random.Generator) -> tuple[Layout, Position]:
    """The red car at the exit and up to ``vehicles - 1`` others (length 3 one time in four) where they
    fit."""
    row = exit_row(n)
    cars = [Vehicle(True, row, 2)]
    position = [n - 2]
    taken = {
        (row, n - 3),
        (row, n - 2),
        (row, n - 1),
    }  # the cell left of the red car stays free: it can back out
    for _ in range(200):
        if len(cars) == vehicles:
            break
        horizontal = bool(rng.integers(2))
        length = 3 if rng.random() < 0.25 else 2
        line, at = int(rng.integers(n)), int(rng.integers(n - length + 1))
        if horizontal and line == row:
            continue  # nothing but the red car slides along the exit row
        car = Vehicle(horizontal, line, length)
        cells = {(line, at + i) if horizontal else (at + i, line) for i in range(length)}
        if cells & taken:
            continue
        taken |= cells
        cars.append(car)
        position.append(at)
    return Layout(n, tuple(cars)), tuple(position)


def _distances(layout: Layout, seed: int, most: int) -> tuple[dict[int, int] | None, int]:
    """Fewest moves to solved from every packed position reachable from ``seed`` (its component), or None
    past ``most`` positions; and the positions searched."""
    links: dict[int, list[int]] = {seed: layout.neighbours(seed)}
    queue = deque([seed])
    while queue:
        for nxt in links[queue.popleft()]:
            if nxt not in links:
                if len(links) >= most:
                    return None, len(links)
                links[nxt] = layout.neighbours(nxt)
                queue.append(nxt)
    goal = layout.n - layout.vehicles[0].length
    distance = {s: 0 for s in sorted(links) if s & MASK == goal}
    queue = deque(distance)
    while queue:
        at = queue.popleft()
        for nxt in links[at]:
            if nxt not in distance:
                distance[nxt] = distance[at] + 1
                queue.append(nxt)
    return distance, len(links)


def generate(
    n: int, vehicles: int, min_moves: int, max_moves: int, max_search: int, rng: np.random.Generator
) -> Level:
    """A level whose start needs ``min_moves`` to ``max_moves`` moves (fewer only when no draw within
    ``max_search`` positions searched reaches ``min_moves``; never zero)."""
    best: Level | None = None
    work = max_search
    for attempt in range(ATTEMPTS):
        if work <= 0:
            break
        layout, solved = _place(n, vehicles, rng)
        distance, searched = _distances(layout, layout.pack(solved), min(MAX_STATES, work))
        work -= searched
        if distance is None:
            continue
        depth = max((d for d in distance.values() if d <= max_moves), default=0)
        if depth == 0 or (best is not None and depth <= best.optimal_moves):
            continue
        deepest = sorted(p for p, d in distance.items() if d == depth)
        best = Level(layout, layout.unpack(deepest[int(rng.integers(len(deepest)))]), distance, attempt)
        if depth >= min_moves:
            return best
    if best is None:  # no draw could even leave the exit: the red car alone, one move from out
        layout = Layout(n, (Vehicle(True, exit_row(n), 2),))
        best = Level(layout, (0,), {c: int(c < n - 2) for c in range(n - 1)}, ATTEMPTS)
    return best
