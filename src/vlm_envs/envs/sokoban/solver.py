"""Move-optimal Sokoban solver: A* over push states with a node and time budget.

A node is (player cell, box set) right after a push; an edge is "walk to a cell behind a box, then
push it once", costing the walk length + 1. The heuristic is the minimum-cost matching of boxes to
targets under push distances that ignore other boxes; it is consistent (one push changes it by at
most 1), so the first solved node taken from the queue is optimal in moves, not only in pushes.
Cells from which no target can be reached by pushing, and 2x2 blocks of boxes and walls holding a
box off target, are pruned (both are true dead ends).
"""

from __future__ import annotations

import heapq
import itertools
import time
from typing import NamedTuple

from vlm_envs.envs.sokoban.board import MOVES, Layout, State, parse_level

_INF = 1 << 30
_OPPOSITE = (1, 0, 3, 2)
#: Above this many boxes the heuristic sums each box's nearest target instead of matching.
_MATCHING_MAX_BOXES = 5


class SolveResult(NamedTuple):
    """``moves``: an optimal solution over ``UDLR`` or None; ``complete``: the search finished
    (so None means unsolvable); ``nodes``: push states expanded."""

    moves: str | None
    complete: bool
    nodes: int


def goal_distances(layout: Layout) -> list[list[int]]:
    """``d[t][cell]``: fewest pushes to bring a lone box from ``cell`` to target ``t`` (or a huge number)."""
    step = layout.step
    result = []
    for target in sorted(layout.targets):
        dist = [_INF] * (layout.rows * layout.cols)
        dist[target] = 0
        frontier = [target]
        while frontier:
            nxt = []
            for cell in frontier:
                for d in range(4):
                    # A box now at ``cell`` came from ``prev`` pushed in direction d, the player behind it.
                    prev = layout.step[_OPPOSITE[d]][cell]
                    if prev >= 0 and dist[prev] == _INF and step[_OPPOSITE[d]][prev] >= 0:
                        dist[prev] = dist[cell] + 1
                        nxt.append(prev)
            frontier = nxt
        result.append(dist)
    return result


class Solver:
    """A* searches on one layout; holds its precomputed tables (reuse it for many states)."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self.step = layout.step
        self.gd = goal_distances(layout)
        self.live = [min(d[c] for d in self.gd) < _INF for c in range(layout.rows * layout.cols)]
        self.target_mask = sum(1 << t for t in layout.targets)
        k = len(layout.targets)
        self.perms = list(itertools.permutations(range(k))) if k <= _MATCHING_MAX_BOXES else None
        self.h_cache: dict[int, int] = {}

    def lower_bound(self, state: State) -> int:
        """A lower bound on the moves needed from ``state`` (huge when a box can reach no target)."""
        boxes = tuple(sorted(state.boxes))
        return self.heuristic(sum(1 << b for b in boxes), boxes)

    def heuristic(self, boxmask: int, boxes: tuple[int, ...]) -> int:
        """Matching cost of ``boxes`` (sorted, with bit mask ``boxmask``) to the targets."""
        h = self.h_cache.get(boxmask)
        if h is None:
            gd = self.gd
            if self.perms is None:
                h = sum(min(d[b] for d in gd) for b in boxes)
            else:
                h = min(sum(gd[t][b] for t, b in zip(perm, boxes, strict=True)) for perm in self.perms)
            self.h_cache[boxmask] = h
        return h

    def walk(self, start: int, boxmask: int) -> dict[int, int]:
        """Walking distance from ``start`` to every cell the player can reach without pushing."""
        dist = {start: 0}
        frontier = [start]
        steps = self.step
        d = 0
        while frontier:
            d += 1
            nxt = []
            for cell in frontier:
                for s in steps:
                    n = s[cell]
                    if n >= 0 and n not in dist and not (boxmask >> n) & 1:
                        dist[n] = d
                        nxt.append(n)
            frontier = nxt
        return dist

    def walk_path(self, start: int, goal: int, boxmask: int) -> str:
        """A shortest walk from ``start`` to ``goal`` as move letters (goal must be reachable)."""
        parent = {start: (-1, "")}
        frontier = [start]
        while goal not in parent:
            nxt = []
            for cell in frontier:
                for d, s in enumerate(self.step):
                    n = s[cell]
                    if n >= 0 and n not in parent and not (boxmask >> n) & 1:
                        parent[n] = (cell, MOVES[d])
                        nxt.append(n)
            frontier = nxt
        letters = []
        cell = goal
        while cell != start:
            cell, letter = parent[cell]
            letters.append(letter)
        return "".join(reversed(letters))

    def frozen(self, cell: int, boxmask: int) -> bool:
        """A box just pushed to ``cell`` sits in a 2x2 block of walls/boxes holding a box off target."""
        cols, rows = self.layout.cols, self.layout.rows
        walls = self.layout.walls
        r, c = divmod(cell, cols)
        for r0 in (r - 1, r):
            for c0 in (c - 1, c):
                off_target = False
                blocked = True
                for rr, cc in ((r0, c0), (r0, c0 + 1), (r0 + 1, c0), (r0 + 1, c0 + 1)):
                    if not (0 <= rr < rows and 0 <= cc < cols):
                        continue
                    x = rr * cols + cc
                    if (boxmask >> x) & 1:
                        off_target = off_target or not (self.target_mask >> x) & 1
                    elif not walls[x]:
                        blocked = False
                        break
                if blocked and off_target:
                    return True
        return False

    def solve(
        self, start: State, max_nodes: int = 200_000, time_limit: float | None = None, weight: float = 1.0
    ) -> SolveResult:
        """Search from ``start`` with at most ``max_nodes`` expansions and ``time_limit`` seconds.

        ``weight`` > 1 multiplies the heuristic (weighted A*): faster, but the solution found is only
        an upper bound on the optimum.
        """
        boxes0 = tuple(sorted(start.boxes))
        mask0 = sum(1 << b for b in boxes0)
        if mask0 == self.target_mask:
            return SolveResult("", True, 0)
        h0 = self.heuristic(mask0, boxes0)
        if h0 >= _INF:
            return SolveResult(None, True, 0)
        deadline = None if time_limit is None else time.perf_counter() + time_limit
        key0 = (start.player, mask0)
        best = {key0: 0}
        parent: dict[tuple[int, int], tuple[tuple[int, int], int, int]] = {}
        counter = itertools.count()
        heap = [(weight * h0, 0, next(counter), start.player, mask0, boxes0)]
        step, live = self.step, self.live
        nodes = 0
        while heap:
            _, neg_g, _, player, mask, boxes = heapq.heappop(heap)
            g = -neg_g
            if best.get((player, mask), _INF) < g:
                continue
            if mask == self.target_mask:
                return SolveResult(self._path(start.player, mask0, (player, mask), parent), True, nodes)
            nodes += 1
            if nodes > max_nodes or (deadline and not nodes & 127 and time.perf_counter() > deadline):
                return SolveResult(None, False, nodes)
            reach = self.walk(player, mask)
            for b in boxes:
                for d in range(4):
                    behind = step[_OPPOSITE[d]][b]
                    dest = step[d][b]
                    if behind < 0 or dest < 0 or behind not in reach or (mask >> dest) & 1 or not live[dest]:
                        continue
                    new_mask = mask ^ (1 << b) ^ (1 << dest)
                    if self.frozen(dest, new_mask):
                        continue
                    new_g = g + reach[behind] + 1
                    key = (b, new_mask)
                    if new_g >= best.get(key, _INF):
                        continue
                    new_boxes = tuple(sorted(dest if x == b else x for x in boxes))
                    h = self.heuristic(new_mask, new_boxes)
                    best[key] = new_g
                    parent[key] = ((player, mask), behind, d)
                    heapq.heappush(heap, (new_g + weight * h, -new_g, next(counter), b, new_mask, new_boxes))
        return SolveResult(None, True, nodes)

    def _path(
        self,
        player0: int,
        mask0: int,
        goal: tuple[int, int],
        parent: dict[tuple[int, int], tuple[tuple[int, int], int, int]],
    ) -> str:
        pushes = []
        key = goal
        while key != (player0, mask0):
            prev, behind, d = parent[key]
            pushes.append((prev, behind, d))
            key = prev
        parts = []
        for (player, mask), behind, d in reversed(pushes):
            parts.append(self.walk_path(player, behind, mask) + MOVES[d])
        return "".join(parts)


def solve_state(
    layout: Layout, state: State, max_nodes: int = 200_000, time_limit: float | None = None
) -> SolveResult:
    """Solve from ``state`` with at most ``max_nodes`` push-state expansions and ``time_limit`` seconds."""
    return Solver(layout).solve(state, max_nodes, time_limit)


def solve(level_ascii: str, max_nodes: int = 200_000, time_limit: float | None = 10.0) -> str | None:
    """An optimal (fewest moves) solution of a Boxoban-style ASCII level over ``UDLR``, or None when
    the level has no solution or none was found within the budget."""
    layout, state = parse_level(level_ascii)
    return solve_state(layout, state, max_nodes, time_limit).moves
