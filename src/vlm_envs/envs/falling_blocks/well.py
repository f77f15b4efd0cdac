"""The well's rules: a board of settled cells, a hard drop straight down, and full rows cleared.

A board is a tuple of row masks from the bottom row up, holding the rows up to the highest settled cell
(every row below that holds a cell: a piece rests on what is under it and a clear removes whole rows); bit
``c`` of a row is column ``c`` from the left. A piece dropped at a column falls straight down from above the
well until a cell of it would enter a settled cell's column at or below that column's top (no sliding under
overhangs); it tops out when it comes to rest sticking out above the well. Then every full row is cleared
and the rows above move down.
"""

from __future__ import annotations

from operator import or_, sub
from typing import NamedTuple

from vlm_envs.envs.falling_blocks.pieces import Shape

Board = tuple[int, ...]


class Drop(NamedTuple):
    """What one drop did: the board after it, the lines it cleared, the row its lowest cell came to rest
    on (0 the bottom row), and whether it topped out (then ``board`` is the board before it)."""

    board: Board
    cleared: int
    row: int
    topped_out: bool


def column_heights(board: Board, width: int) -> list[int]:
    """For each column, the number of rows up to and including its highest settled cell."""
    heights = [0] * width
    seen, full = 0, (1 << width) - 1
    for y in range(len(board) - 1, -1, -1):
        new = board[y] & ~seen
        while new:
            low = new & -new
            heights[low.bit_length() - 1] = y + 1
            new ^= low
        seen |= board[y]
        if seen == full:
            break
    return heights


def drop(board: Board, piece: Shape, column: int, width: int, depth: int, heights: list[int]) -> Drop:
    """``piece`` dropped with its leftmost cell at ``column`` (it must fit the ``width``) into a well
    ``depth`` rows deep whose column heights are ``heights``."""
    y = max(map(sub, heights[column : column + piece.width], piece.bottoms))
    top = y + len(piece.rows)
    if top > depth:
        return Drop(board, 0, y, True)
    under = board[y:top]
    if len(under) < len(piece.rows):
        under += (0,) * (len(piece.rows) - len(under))
    merged = tuple(map(or_, under, piece.shifted[column]))
    full = (1 << width) - 1
    if full not in merged:
        return Drop(board[:y] + merged + board[top:], 0, y, False)
    kept = tuple(row for row in merged if row != full)
    return Drop(board[:y] + kept + board[top:], len(merged) - len(kept), y, False)
