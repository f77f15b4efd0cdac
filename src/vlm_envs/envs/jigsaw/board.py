"""Jigsaw's rules: an arrangement is a permutation, ``board[p]`` the tile at position ``p``
(0-based, row-major); solved when every tile is at its own position."""

from __future__ import annotations

import numpy as np

Board = tuple[int, ...]


def shuffled(tiles: int, rng: np.random.Generator) -> Board:
    """A random arrangement that is never already solved."""
    while True:
        board = tuple(int(t) for t in rng.permutation(tiles))
        if any(t != p for p, t in enumerate(board)):
            return board


def swap(board: Board, a: int, b: int) -> Board:
    out = list(board)
    out[a], out[b] = out[b], out[a]
    return tuple(out)


def in_place(board: Board) -> int:
    return sum(t == p for p, t in enumerate(board))


def cycles(board: Board) -> int:
    """Cycles of the permutation, fixed points included."""
    seen = [False] * len(board)
    count = 0
    for start in range(len(board)):
        if not seen[start]:
            count += 1
            p = start
            while not seen[p]:
                seen[p] = True
                p = board[p]
    return count


def optimal_swaps(board: Board) -> int:
    """Fewest swaps that solve ``board``: tiles minus cycles."""
    return len(board) - cycles(board)


def oracle_swaps(board: Board) -> list[tuple[int, int]]:
    """An optimal swap sequence: put the right tile at each wrong position in turn (each swap fixes one
    tile, the last of each cycle two), ``optimal_swaps(board)`` swaps in all."""
    board_list = list(board)
    where = {t: p for p, t in enumerate(board_list)}
    out = []
    for p in range(len(board_list)):
        if board_list[p] != p:
            q = where[p]
            out.append((p, q))
            where[board_list[p]] = q
            board_list[p], board_list[q] = p, board_list[p]
    return out
