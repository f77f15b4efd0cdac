"""The built-in opponent: a deterministic depth-limited negamax with alpha-beta pruning.

The engine to move picks its column by these rules, in order:

1. a column that makes four in a row now (the first in its ``order``);
2. else, where the other player could make four now, it blocks (the first such cell in its ``order``);
3. else it keeps to the *safe* columns, whose stone does not land right under a cell that gives the other
   player four (if none is safe, the first legal column in its ``order``; if one, that one);
4. else the safe column of best negamax score over ``depth`` plies (its own move the first), the first
   in its ``order`` among equal scores.

Inside the search every position follows the same rules, scored exactly: a win now ``WIN - ply``, a loss
that no move prevents (two cells to block, or no safe column) ``-(WIN - ply - 1)``, a full board 0. At
depth 0 a position still unsettled by the rules scores 8 per empty cell that would give the player to move
four, minus 8 per such cell of the other player, plus the player's stones in the middle column(s) minus
the other's. Since the rules look one ply further, the engine sees every win the other player can force
within ``(depth + 3) // 2`` of their own moves (:func:`horizon`). The search order inside is the middle
columns first; only the root follows ``order``, so ``order`` breaks ties and never changes a score.
A reply is a pure function of its inputs, cached per process.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from vlm_envs.envs.connect_four.board import Geometry, playable, winning_cells

#: The score of a win now; a win ``n`` plies away scores ``WIN - n``.
WIN = 100_000
#: Scores above this (below its negative) are forced wins (losses).
MATE = WIN // 2
#: A score below every other.
_BELOW = -WIN - 1


class Reply(NamedTuple):
    """The engine's column and the positions its search visited (the cost of finding it)."""

    column: int
    nodes: int


def horizon(depth: int) -> int:
    """The most moves of the other player's forced win the engine at ``depth`` sees: within it, a win
    against this engine is a win against every defence (docs: the oracle's search)."""
    return (depth + 3) // 2


@lru_cache(maxsize=1 << 16)
def reply(g: Geometry, depth: int, order: tuple[int, ...], stones: int, mask: int) -> Reply:
    """The engine's move when it holds ``stones`` (of ``mask``, every stone) and is to move; the board
    must have a legal column and no four in a row."""
    free = playable(g, mask)
    columns = [c for c in order if free & g.column_masks[c]]
    mine = winning_cells(g, stones, mask) & free
    for col in columns:
        if mine & g.column_masks[col]:
            return Reply(col, 1)
    other = stones ^ mask
    theirs = winning_cells(g, other, mask)
    for col in columns:
        if theirs & free & g.column_masks[col]:
            return Reply(col, 1)
    safe = [c for c in columns if not free & g.column_masks[c] & (theirs >> 1)]
    if len(safe) <= 1:
        return Reply(safe[0] if safe else columns[0], 1)
    search = _Search(g)
    best, alpha = safe[0], _BELOW
    for col in safe:
        move = free & g.column_masks[col]
        score = -search.value(other, mask | move, depth - 1, _BELOW, -alpha, 1)
        if score > alpha:
            best, alpha = col, score
    return Reply(best, search.nodes + 1)


class _Search:
    """One negamax search: the board's masks at hand and the positions visited."""

    def __init__(self, g: Geometry):
        self.g = g
        self.nodes = 0
        self.columns = [g.column_masks[c] for c in g.centre_order]

    def value(self, cur: int, mask: int, depth: int, alpha: int, beta: int, ply: int) -> int:
        """The score of the player to move, who holds ``cur``, searched ``depth`` more plies."""
        self.nodes += 1
        g = self.g
        free = (mask + g.bottoms) & g.full
        if not free:
            return 0
        mine = winning_cells(g, cur, mask)
        if mine & free:
            return WIN - ply
        other = cur ^ mask
        theirs = winning_cells(g, other, mask)
        forced = theirs & free
        if forced:
            if forced & (forced - 1):
                return ply + 1 - WIN
            free = forced
        moves = free & ~(theirs >> 1)
        if not moves:
            return ply + 1 - WIN
        if depth <= 0:
            centre = g.centre
            return (
                8 * (mine.bit_count() - theirs.bit_count())
                + (cur & centre).bit_count()
                - (other & centre).bit_count()
            )
        best = _BELOW
        for column in self.columns:
            move = moves & column
            if not move:
                continue
            score = -self.value(other, mask | move, depth - 1, -beta, -alpha, ply + 1)
            if score > best:
                best = score
                if score > alpha:
                    alpha = score
                    if alpha >= beta:
                        break
        return best
