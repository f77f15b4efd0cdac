"""The fewest of your moves to a win against the engine, and the first column of such a win.

The engine is deterministic, so playing against it is a puzzle for one player: your move, then its known
reply. Within the engine's horizon (:func:`~vlm_envs.envs.connect_four.engine.horizon`, ``(depth + 3) // 2``
of your moves) the engine sees every win you can force and escapes where any escape exists, so a win there
against this engine is a win against every defence: the search is a forced-win search over both players'
moves (with the engine's own sure rules: a win now is taken, a threat to win now is blocked, a stone is
never dropped right under the other player's winning cell unless every column is). Past the horizon the
search follows the engine's actual replies, down to positions within the horizon. Iterative deepening
makes the first win found the shortest; a line of four nobody blocks yet bounds how soon you can finish
(fewer stones than a line lacks never complete it), which prunes.

Work is counted in positions visited (an engine reply counts the positions its own search visited, cached
or not), so a search ends the same way in any process; past ``budget`` it gives up (``complete`` false).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from vlm_envs.envs.connect_four.board import Geometry, has_four, open_lines, playable, winning_cells
from vlm_envs.envs.connect_four.engine import horizon, reply

#: Positions one search may visit (the distance's, the oracle's, each of the generator's): past it the
#: distance is ``None``, the oracle plays its own side's engine move, the generator passes the position by.
SEARCH_BUDGET = 20_000


class Outcome(NamedTuple):
    """A search's answer: the fewest moves to a win and its first column (``None`` both where no win
    exists within the moves searched), and whether it finished within its budget."""

    moves: int | None
    column: int | None
    complete: bool


class _OutOfBudget(Exception):
    pass


class _Search:
    """One search from one position: what it proved, per position, and the work done."""

    def __init__(self, g: Geometry, depth: int, order: tuple[int, ...], budget: int):
        self.g, self.depth, self.order, self.budget = g, depth, order, budget
        self.horizon = horizon(depth)
        self.nodes = 0
        #: Per position (your stones, every stone): the most moves proven too few to win.
        self.too_few: dict[tuple[int, int], int] = {}
        #: Per position: the fewest moves proven enough, and the first column of that win.
        self.enough: dict[tuple[int, int], tuple[int, int]] = {}

    def spend(self, nodes: int) -> None:
        self.nodes += nodes
        if self.nodes > self.budget:
            raise _OutOfBudget

    def winning_column(self, cur: int, mask: int, moves: int) -> int | None:
        """The first column (middle first) from which you, holding ``cur`` and to move, win within
        ``moves`` of your moves against the engine; ``None`` where none does."""
        g = self.g
        self.spend(1)
        free = playable(g, mask)
        mine = winning_cells(g, cur, mask)
        if mine & free:
            return next(c for c in g.centre_order if mine & free & g.column_masks[c])
        key = (cur, mask)
        known = self.enough.get(key)
        if known is not None and known[0] <= moves:
            return known[1]
        if moves <= 1 or self.too_few.get(key, 0) >= moves or not open_lines(g, cur, mask, moves):
            return None
        other = cur ^ mask
        theirs = winning_cells(g, other, mask)
        forced = theirs & free
        if forced & (forced - 1):
            self.too_few[key] = 1 << 30
            return None
        candidates = (forced or free) & ~(theirs >> 1)
        for col in g.centre_order:
            move = candidates & g.column_masks[col]
            if not move:
                continue
            after = mask | move
            if after == g.full or not open_lines(g, cur | move, after, moves - 1):
                continue
            if moves <= self.horizon:
                won = self.every_reply_loses(other, after, cur | move, moves - 1)
            else:
                won = self.wins_after_reply(other, after, moves - 1)
            if won:
                self.enough[key] = (moves, col)
                return col
        self.too_few[key] = max(self.too_few.get(key, 0), moves)
        return None

    def every_reply_loses(self, them: int, mask: int, you: int, moves: int) -> bool:
        """Whether every column of the player to move (holding ``them``) lets you win within ``moves``."""
        g = self.g
        self.spend(1)
        free = playable(g, mask)
        if winning_cells(g, them, mask) & free:
            return False
        yours = winning_cells(g, you, mask)
        forced = yours & free
        if forced & (forced - 1):
            return True
        candidates = (forced or free) & ~(yours >> 1)
        for col in g.centre_order:
            move = candidates & g.column_masks[col]
            if move and (mask | move == g.full or self.winning_column(you, mask | move, moves) is None):
                return False
        return True

    def wins_after_reply(self, engine: int, mask: int, moves: int) -> bool:
        """Whether you win within ``moves`` after the engine (holding ``engine``, to move) replies."""
        g = self.g
        answer = reply(g, self.depth, self.order, engine, mask)
        self.spend(answer.nodes)
        move = playable(g, mask) & g.column_masks[answer.column]
        after = mask | move
        if has_four(g, engine | move) or after == g.full:
            return False
        return self.winning_column(engine ^ mask, after, moves) is not None


@lru_cache(maxsize=1 << 14)
def shortest_win(
    g: Geometry, depth: int, order: tuple[int, ...], you: int, mask: int, most: int, budget: int
) -> Outcome:
    """The fewest of your moves (you hold ``you`` of ``mask`` and are to move) to a win against the engine
    of ``depth`` and tie ``order``, searched up to ``most`` moves and ``budget`` positions. The board must
    have a legal column and no four in a row. Cached per process (a pure function)."""
    search = _Search(g, depth, order, budget)
    if not open_lines(g, you, mask, 4):
        return Outcome(None, None, True)  # every line holds an engine stone
    try:
        for moves in range(1, most + 1):
            column = search.winning_column(you, mask, moves)
            if column is not None:
                return Outcome(moves, column, True)
    except _OutOfBudget:
        return Outcome(None, None, False)
    return Outcome(None, None, True)


def moves_left(g: Geometry, mask: int) -> int:
    """The most moves you can still make, you to move: one of every two empty cells, the first yours."""
    return ((g.full ^ mask).bit_count() + 1) // 2
