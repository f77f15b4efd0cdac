"""SlidingPuzzle's rules: an n x n board of tiles 1..n²-1 and one gap (0), row-major.

A move names the direction a tile slides into the gap: ``Up`` slides the tile below the gap up (the gap
goes down). Solved is ``1, 2, ..., n²-1`` with the gap last. Every scramble is a walk of legal moves
from the solved board, so every start is solvable.
"""

from __future__ import annotations

import numpy as np

Board = tuple[int, ...]
#: Move names, indexed as the move ids used everywhere in this package.
MOVE_NAMES = ("Up", "Down", "Left", "Right")
#: Where the gap goes for each move (row, column): the tile slides the other way.
GAP_STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))
#: The move that undoes each move.
INVERSE = (1, 0, 3, 2)


def solved(n: int) -> Board:
    return (*range(1, n * n), 0)


def tile_to_move(board: Board, n: int, move: int) -> int | None:
    """The position of the tile that ``move`` slides (None: no tile on that side of the gap)."""
    gap = board.index(0)
    r, c = divmod(gap, n)
    dr, dc = GAP_STEPS[move]
    r, c = r + dr, c + dc
    return r * n + c if 0 <= r < n and 0 <= c < n else None


def apply_move(board: Board, n: int, move: int) -> Board | None:
    """The board after ``move``, or None when no tile can slide that way."""
    at = tile_to_move(board, n, move)
    if at is None:
        return None
    out = list(board)
    gap = board.index(0)
    out[gap], out[at] = out[at], 0
    return tuple(out)


def legal_moves(board: Board, n: int) -> list[int]:
    return [m for m in range(4) if tile_to_move(board, n, m) is not None]


def in_place(board: Board) -> int:
    """Tiles (not the gap) at their solved position."""
    return sum(t == p + 1 for p, t in enumerate(board) if t)


def scramble(n: int, moves: int, rng: np.random.Generator) -> tuple[Board, list[int]]:
    """A walk of ``moves`` random legal moves from the solved board that never undoes the move before
    (longer while it stands on the solved board, which a walk around a 2x2 board does); the board it
    ends on and the walk."""
    home = solved(n)
    board, walk = home, []
    while len(walk) < moves or board == home:
        options = [m for m in legal_moves(board, n) if not walk or m != INVERSE[walk[-1]]]
        move = options[int(rng.integers(len(options)))]
        board = apply_move(board, n, move)  # type: ignore[assignment]
        walk.append(move)
    return board, walk


def undo_path(walk: list[int]) -> list[int]:
    """The moves that take a walk's end back to its start, with back-and-forth pairs cancelled."""
    out: list[int] = []
    for move in reversed(walk):
        inverse = INVERSE[move]
        if out and out[-1] == INVERSE[inverse]:
            out.pop()
        else:
            out.append(inverse)
    return out
