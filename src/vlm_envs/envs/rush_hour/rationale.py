"""Rush Hour's oracle rationale: where the red car is, what stands in its way, how many moves a shortest
solution takes and which moves come next. Rows and columns count from 1 at the top left."""

from __future__ import annotations

from collections.abc import Sequence

from vlm_envs.envs.phrasing import counted, series
from vlm_envs.envs.rush_hour.board import NAMES, Layout, Position, exit_row, grid


def explain(layout: Layout, position: Position, remaining: int, moves: Sequence[tuple[int, str, int]]) -> str:
    """Why ``moves`` (the first of a shortest solution ``remaining`` moves long) come next."""
    n, row = layout.n, exit_row(layout.n)
    left = position[0]
    cells = grid(layout, position)[row]
    blockers = [f"{cells[c]} (column {c + 1})" for c in range(left + 2, n) if cells[c] != "."]
    text = f"X is in row {row + 1}, columns {left + 1}-{left + 2}; the exit is at the right end of its row."
    text += f" In its way: {series(blockers)}." if blockers else " Its way out is clear."
    steps = ", ".join(f"{NAMES[v]} {d} {k}" for v, d, k in moves)
    return f"{text} A shortest solution takes {counted(remaining, 'more move')}; next: {steps}."
