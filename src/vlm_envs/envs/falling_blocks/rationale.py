"""Falling blocks' oracle rationale: the lines still to clear, the fewest placements that clear them with
the pieces to come, and where the current piece comes to rest and what it clears."""

from __future__ import annotations

from vlm_envs.envs.falling_blocks.pieces import shape
from vlm_envs.envs.falling_blocks.solver import Placement
from vlm_envs.envs.falling_blocks.well import Board, column_heights, drop
from vlm_envs.envs.phrasing import counted


def rows_named(first: int, count: int) -> str:
    """``row 3`` or ``rows 3 to 4`` (``first`` from 0)."""
    return f"row {first + 1}" if count == 1 else f"rows {first + 1} to {first + count}"


def explain(
    board: Board, piece: str, lines: int, plan: tuple[Placement, ...], fewest: bool, width: int, depth: int
) -> str:
    """Why the first placement of ``plan`` (which clears ``lines`` lines; the fewest that do where
    ``fewest``) comes now."""
    rotation, column = plan[0]
    turned = shape(piece, rotation)
    result = drop(board, turned, column, width, depth, column_heights(board, width))
    full = (1 << width) - 1
    merged = list(board) + [0] * turned.height
    for i, mask in enumerate(turned.shifted[column]):
        merged[result.row + i] |= mask
    cleared = [result.row + i for i in range(turned.height) if merged[result.row + i] == full]
    clears = "clears no line" if not cleared else f"clears {', '.join(rows_named(r, 1) for r in cleared)}"
    them = "it" if lines == 1 else "them"
    how = "the fewest placements" if fewest else "the placements of my plan"
    return (
        f"{counted(lines, 'line')} to clear; {how} that clear {them} with the pieces to come: {len(plan)}. "
        f"Now the {piece} at rotate {rotation}, column {column + 1}: it comes to rest on "
        f"{rows_named(result.row, turned.height)} and {clears}."
    )
