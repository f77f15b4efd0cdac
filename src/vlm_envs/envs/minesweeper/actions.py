"""Minesweeper's answers: ``<answer>C4, D5</answer>``, the cells to reveal (column letter, row number)."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.minesweeper.board import Cell, name

_CELL = re.compile(r"(?:reveal\s+)?([A-Za-z])\s*([0-9]{1,3})(?![0-9A-Za-z])", re.IGNORECASE | re.ASCII)
_SEPARATORS = re.compile(r"[\s,;]*")


class ParsedCells(NamedTuple):
    """Cells to reveal, in order, when the answer is well formed, else ``error`` says why."""

    cells: tuple[Cell, ...]
    error: str | None


def parse_cells(text: str, rows: int, cols: int, max_cells: int) -> ParsedCells:
    """Cells from the last ``<answer>`` block: 1 to ``max_cells`` names like ``C4`` (case-insensitive,
    an optional ``reveal`` before each), separated by commas, semicolons or spaces."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedCells((), block.error)
    content, at, cells = block.content, 0, []
    while at < len(content):
        at = _SEPARATORS.match(content, at).end()  # type: ignore[union-attr]
        if at >= len(content):
            break
        match = _CELL.match(content, at)
        if match is None:
            return ParsedCells((), f"expected a cell such as C4 at {shown(content[at : at + 12])!r}")
        col = string.ascii_uppercase.index(match.group(1).upper())
        row = int(match.group(2)) - 1
        if not (0 <= row < rows and col < cols):
            last = string.ascii_uppercase[cols - 1]
            return ParsedCells(
                (), f"{shown(match.group(0))} is off the board (columns A-{last}, rows 1-{rows})"
            )
        cells.append(row * cols + col)
        if len(cells) > max_cells:
            return ParsedCells((), f"more than {max_cells} cells given (at most {max_cells} per turn)")
        at = match.end()
    if not cells:
        return ParsedCells((), "the answer names no cell")
    return ParsedCells(tuple(cells), None)


def format_cells(cells: Sequence[Cell], cols: int) -> str:
    """An answer block, e.g. ``<answer>C4, D5</answer>``."""
    return "<answer>" + ", ".join(name(c, cols) for c in cells) + "</answer>"
