"""SlidingPuzzle's solver: A* with the Manhattan distance plus linear conflicts (admissible), so a path
it returns within its node budget is a shortest one; past the budget a weighted search finds a short one.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from typing import NamedTuple

from vlm_envs.envs.sliding_puzzle.board import GAP_STEPS, Board, solved

#: Nodes one exact search may expand (about 0.2 s of work at worst); a weighted search follows past it.
EXACT_NODES = 10_000
#: Nodes the weighted fallback may expand.
WEIGHTED_NODES = 20_000
#: Nodes the exact search behind ``distance_to_goal`` may expand on a board no plan covers: every turn of a
#: rollout asks, so its worst case stays near a step's budget (a few ms a board the oracle has not met).
DISTANCE_NODES = 1_000


class Solution(NamedTuple):
    """Moves that solve the board (None: none found within the budgets) and whether they are shortest."""

    moves: tuple[int, ...] | None
    exact: bool


@functools.lru_cache(maxsize=8)
def _tables(n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, int], ...]]:
    """Per tile and position the Manhattan distance to its goal; per tile its goal (row, column)."""
    goal = [(0, 0)] + [divmod(t - 1, n) for t in range(1, n * n)]
    dist = tuple(
        tuple(abs(p // n - goal[t][0]) + abs(p % n - goal[t][1]) for p in range(n * n)) for t in range(n * n)
    )
    return dist, tuple(goal)


def heuristic(board: Board, n: int) -> int:
    """Manhattan distance plus 2 per linear conflict (two tiles in their goal line in the wrong order)."""
    dist, goal = _tables(n)
    h = sum(dist[t][p] for p, t in enumerate(board) if t)
    for line in range(n):
        row = [goal[t][1] for t in board[line * n : line * n + n] if t and goal[t][0] == line]
        col = [goal[t][0] for t in board[line::n] if t and goal[t][1] == line]
        h += 2 * (_conflicts(row) + _conflicts(col))
    return h


def _conflicts(goals: list[int]) -> int:
    """Tiles to lift out of a line so the rest stand in order: its length minus the longest increasing run."""
    if len(goals) < 2:
        return 0
    best = [1] * len(goals)
    for i in range(len(goals)):
        for j in range(i):
            if goals[j] < goals[i]:
                best[i] = max(best[i], best[j] + 1)
    return len(goals) - max(best)


def _search(start: Board, n: int, weight: int, max_nodes: int) -> tuple[int, ...] | None:
    goal = solved(n)
    tie = itertools.count()
    parent: dict[Board, tuple[Board, int] | None] = {start: None}
    cost = {start: 0}
    frontier = [(weight * heuristic(start, n), next(tie), start)]
    expanded = 0
    while frontier and expanded < max_nodes:
        _, _, board = heapq.heappop(frontier)
        if board == goal:
            path = []
            while (link := parent[board]) is not None:
                board, move = link
                path.append(move)
            return tuple(path[::-1])
        expanded += 1
        g = cost[board] + 1
        gap = board.index(0)
        r, c = divmod(gap, n)
        for move, (dr, dc) in enumerate(GAP_STEPS):
            if not (0 <= r + dr < n and 0 <= c + dc < n):
                continue
            at = (r + dr) * n + c + dc
            child = list(board)
            child[gap], child[at] = child[at], 0
            nxt = tuple(child)
            if g < cost.get(nxt, g + 1):
                cost[nxt], parent[nxt] = g, (board, move)
                heapq.heappush(frontier, (g + weight * heuristic(nxt, n), next(tie), nxt))
    return None


@functools.lru_cache(maxsize=4096)
def shortest(board: Board, n: int, max_nodes: int) -> tuple[int, ...] | None:
    """A shortest solution found within ``max_nodes`` expansions, else ``None``."""
    return _search(board, n, 1, max_nodes)


@functools.lru_cache(maxsize=4096)
def solve(board: Board, n: int) -> Solution:
    """A shortest solution within :data:`EXACT_NODES`, else a weighted search's (not always shortest)."""
    moves = _search(board, n, 1, EXACT_NODES)
    if moves is not None:
        return Solution(moves, True)
    return Solution(_search(board, n, 3, WEIGHTED_NODES), False)
