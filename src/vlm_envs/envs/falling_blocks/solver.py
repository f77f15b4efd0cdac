"""The fewest placements that clear the lines still to clear, with the piece sequence known.

An iterative-deepening search over placements (each distinct rotation at each column) of the pieces in
their order, pruned by an admissible lower bound and a table of positions already shown to need more
placements than allowed, within a node budget (a node is one drop). It proves the fewest placements (the
first depth that succeeds), proves that none clear the lines (every depth up to the pieces left fails), or
runs out of nodes.

The lower bound (:func:`fewest_placements_bound`): a row clears only once its every empty cell is filled,
a piece fills 4 cells, and an empty cell under a settled cell of its column can be filled only after every
row holding such a cell has cleared, in an earlier placement. So a row's *depth*, 1 plus the greatest depth
of the rows above it that cover one of its empty cells, is a number of placements its clear needs; rows
above the stack are free rows of depth 1. Clearing ``k`` lines needs, for some depth ``t``, ``t`` placements
and a fourth of the empty cells of the ``k`` emptiest-but-fullest rows of depth at most ``t``.
"""

from __future__ import annotations

import dataclasses

from vlm_envs.envs.falling_blocks.pieces import distinct_rotations, shape
from vlm_envs.envs.falling_blocks.well import Board, column_heights, drop

#: Cells a piece fills.
CELLS_PER_PIECE = 4
#: The most positions the search keeps in its table of positions that need more placements.
MAX_TABLE = 100_000

#: A placement: (rotation, column of the leftmost cell), both from 0.
Placement = tuple[int, int]


def _cells_to_fill(board: Board, lines: int, width: int, depth: int) -> int:
    """The fewest empty cells in ``lines`` rows that clear within ``depth`` placements: rows of the stack of
    depth at most ``depth``, then free rows (``width`` each)."""
    full = (1 << width) - 1
    empties = []
    if depth == 1:  # the common case, apart: rows none of whose empty cells is covered
        above = 0
        for y in range(len(board) - 1, -1, -1):
            if above == full:
                break
            empty = full ^ board[y]
            if not empty & above:
                empties.append(empty.bit_count())
            above |= board[y]
    else:
        cover = [0] * depth  # cover[i]: columns where a row above of depth > i holds a cell
        deepest = depth - 1
        for y in range(len(board) - 1, -1, -1):
            if cover[deepest] == full:  # every row below has a cell covered by a row of depth ``depth``
                break
            row = board[y]
            empty = full ^ row
            d = 0  # the row's depth less one, capped at ``depth``
            for i in range(deepest, -1, -1):
                if cover[i] & empty:
                    d = i + 1
                    break
            if d < depth:
                empties.append(empty.bit_count())
                d += 1
            for i in range(d):
                cover[i] |= row
    if len(empties) > lines:
        empties.sort()
        return sum(empties[:lines])
    return sum(empties) + width * (lines - len(empties))


def within(board: Board, lines: int, width: int, placements: int) -> bool:
    """Whether the lower bound allows clearing ``lines`` more lines from ``board`` in ``placements``."""
    if lines <= 0:
        return True
    if placements <= 0:
        return False
    return _cells_to_fill(board, lines, width, placements) <= CELLS_PER_PIECE * placements


def fewest_placements_bound(board: Board, lines: int, width: int) -> int:
    """A lower bound on the placements that clear ``lines`` more lines from ``board`` (0 for none)."""
    placements = 0
    while not within(board, lines, width, placements):
        placements += 1
    return placements


@dataclasses.dataclass(frozen=True)
class SearchResult:
    """A plan of the fewest placements (``None``: none found), and whether the search was complete (a plan
    found, or proof that the pieces left clear no such lines); ``nodes``: the drops it tried."""

    plan: tuple[Placement, ...] | None
    complete: bool
    nodes: int


class _OutOfNodes(Exception):
    pass


class Solver:
    """Searches one piece sequence in a well ``width`` x ``depth``; keeps what it learns between searches."""

    def __init__(self, width: int, depth: int, sequence: str):
        self.width, self.depth, self.sequence = width, depth, sequence
        #: (board, piece index, lines) -> placements shown to be too few from there.
        self._too_few: dict[tuple[Board, int, int], int] = {}
        self._nodes = 0
        self._limit = 0

    def solve(self, board: Board, index: int, lines: int, max_nodes: int) -> SearchResult:
        """The fewest placements of ``sequence[index:]`` that clear ``lines`` lines from ``board``."""
        if lines <= 0:
            return SearchResult((), True, 0)
        self._nodes, self._limit = 0, max_nodes
        left = len(self.sequence) - index
        try:
            for depth in range(fewest_placements_bound(board, lines, self.width), left + 1):
                plan = self._search(board, index, lines, depth)
                if plan is not None:
                    return SearchResult(tuple(plan), True, self._nodes)
        except _OutOfNodes:
            return SearchResult(None, False, self._nodes)
        return SearchResult(None, True, self._nodes)

    def _search(self, board: Board, index: int, lines: int, depth: int) -> list[Placement] | None:
        """A plan of at most ``depth`` placements from here, or None."""
        key = (board, index, lines)
        if self._too_few.get(key, 0) >= depth:
            return None
        piece, width = self.sequence[index], self.width
        heights = column_heights(board, width)
        hopeful = []  # (-lines cleared, placement, board after) of the placements the bound allows
        for rotation in distinct_rotations(piece):
            turned = shape(piece, rotation)
            for column in range(width - turned.width + 1):
                self._nodes += 1
                if self._nodes > self._limit:
                    raise _OutOfNodes
                result = drop(board, turned, column, width, self.depth, heights)
                if result.topped_out:
                    continue
                if result.cleared >= lines:
                    return [(rotation, column)]
                if within(result.board, lines - result.cleared, width, depth - 1):
                    hopeful.append((-result.cleared, (rotation, column), result.board))
        hopeful.sort(key=lambda child: child[:2])
        for minus_cleared, placement, after in hopeful:
            plan = self._search(after, index + 1, lines + minus_cleared, depth - 1)
            if plan is not None:
                return [placement, *plan]
        if len(self._too_few) >= MAX_TABLE:
            self._too_few.clear()
        self._too_few[key] = depth
        return None
