"""SlidingPuzzle's oracle rationale: where the gap is, how many tiles are home, how long the plan is and
which tiles the next moves slide. Rows and columns are counted from 1 at the top left, as the env says."""

from __future__ import annotations

from collections.abc import Sequence

from vlm_envs.envs.phrasing import counted, series
from vlm_envs.envs.sliding_puzzle.board import MOVE_NAMES, Board, apply_move, in_place, tile_to_move


def explain(board: Board, n: int, plan: Sequence[int], exact: bool, moves_now: int) -> str:
    """Why the first ``moves_now`` moves of ``plan`` (a solution from ``board``) come next."""
    row, col = divmod(board.index(0), n)
    home = in_place(board)
    text = (
        f"The gap is at row {row + 1}, column {col + 1}; {home} of the {n * n - 1} tiles "
        f"{'is' if home == 1 else 'are'} in place. "
        f"{'A shortest' if exact else 'My'} solution takes {counted(len(plan), 'more move')}"
    )
    slides = []
    for move in plan[:moves_now]:
        at = tile_to_move(board, n, move)
        assert at is not None, "a plan only holds legal moves"
        slides.append(f"tile {board[at]} {MOVE_NAMES[move]}")
        board = apply_move(board, n, move)  # type: ignore[assignment]
    return f"{text}; next I slide {series(slides)}."
