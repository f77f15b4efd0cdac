"""Jigsaw's oracle rationale: which positions hold the wrong tile, and which tiles each swap puts in place.

Positions and tiles are numbered from 1 as the env shows them (tile k belongs at position k).
"""

from __future__ import annotations

from collections.abc import Sequence

from vlm_envs.envs.jigsaw.board import Board, swap
from vlm_envs.envs.phrasing import series


def explain(board: Board, swaps: Sequence[tuple[int, int]]) -> str:
    """Why ``swaps`` (0-based position pairs, played in order) come next on ``board``."""
    wrong = [p + 1 for p, tile in enumerate(board) if tile != p]
    many = len(wrong) > 1
    text = (
        f"{len(wrong)} of the {len(board)} tiles {'are' if many else 'is'} out of place, "
        f"at position{'s' if many else ''} {series(map(str, wrong))}."
    )
    moves = []
    for a, b in swaps:
        after = swap(board, a, b)
        home = sorted(t + 1 for t in (board[a], board[b]) if after[t] == t)
        moves.append(f"swap({a + 1},{b + 1}) puts {_tiles(home)} in place")
        board = after
    return f"{text} {'; '.join(moves)}."


def _tiles(numbers: list[int]) -> str:
    """``no tile``, ``tile 3``, ``tiles 3 and 8``."""
    if not numbers:
        return "no tile"
    return f"tile{'s' if len(numbers) > 1 else ''} {series(map(str, numbers))}"
