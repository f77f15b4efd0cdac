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


def explain(board: Board, piece: str, lines: int, plan: tuple[Placement, ...], width: int, depth: int) -> str:
    """Why the first placement of ``plan`` (the fewest that clear ``lines`` lines) comes now."""
    rotation, column = plan[0]
    turned = shape(piece, rotation)
    result = drop(board, turned, column, width, depth, column_heights(board, width))
    full = (1 << width) - 1
    merged = list(board) + [0] * turned.height
    for i, mask in enumerate(turned.shifted[column]):
        merged[result.row + i] |= mask
    cleared = [result.row + i for i in range(turned.height) if merged[result.row + i] == full]
    clears = "clears no line" if not cleared else f"clears {', '.join(rows_named(r, 1) for r in cleared)}"
    return (
        f"{counted(lines, 'line')} to clear; the fewest placements that clear "
        f"{'it' if lines == 1 else 'them'} with the pieces to come: {len(plan)}. Now the {piece} at rotate "
        f"{rotation}, column {column + 1}: it comes to rest on {rows_named(result.row, turned.height)} "
        f"and {clears}."
    )
