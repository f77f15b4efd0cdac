"""SpotDifference's answers: the differing cells by column letter and row number, ``<answer>B2, D3</answer>``
(any case; commas, semicolons, spaces or newlines between them; a cell named twice counts once)."""

from __future__ import annotations

import re
import string
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown
from vlm_envs.envs.spot_difference.scene import cell_name

_CELL = re.compile(r"([A-Za-z])([0-9]{1,2})")


class ParsedCells(NamedTuple):
    """The named cells (row-major, sorted, distinct) when the answer is well formed, else ``error``."""

    cells: tuple[int, ...]
    error: str | None


def parse_cells(text: str, grid: int) -> ParsedCells:
    """The cells of the last ``<answer>`` block, at least one, each a cell of the grid."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedCells((), block.error)
    tokens = answer_tokens(block.content)
    if not tokens:
        return ParsedCells((), "the answer names no cell")
    if len(tokens) > grid * grid:
        return ParsedCells((), f"{len(tokens)} cells named, and the grid has {grid * grid}")
    cells = set()
    for token in tokens:
        match = _CELL.fullmatch(token)
        col = string.ascii_uppercase.find(match.group(1).upper()) if match else -1
        row = int(match.group(2)) - 1 if match else -1
        if not (0 <= col < grid and 0 <= row < grid):
            return ParsedCells(
                (), f"{shown(token)!r} is not a cell (use A1 to {cell_name(grid, grid * grid - 1)})"
            )
        cells.add(row * grid + col)
    return ParsedCells(tuple(sorted(cells)), None)


def format_cells(grid: int, cells: list[int] | tuple[int, ...]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>B2, D3</answer>``."""
    return "<answer>" + ", ".join(cell_name(grid, c) for c in cells) + "</answer>"
