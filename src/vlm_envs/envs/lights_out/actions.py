"""Lights Out's answers: the lights to press by column letter and row number, ``<answer>B2, C3</answer>``
(any case; commas, semicolons, spaces or newlines between them)."""

from __future__ import annotations

import re
import string
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown

_CELL = re.compile(r"([A-Za-z])([0-9]{1,2})")


def cell_name(n: int, cell: int) -> str:
    """``B3`` for the light in column B (the second) and row 3 (the third)."""
    r, c = divmod(cell, n)
    return f"{string.ascii_uppercase[c]}{r + 1}"


class ParsedPresses(NamedTuple):
    """Cells (row-major indices) to press when the answer is well formed, else ``error`` says why."""

    cells: tuple[int, ...]
    error: str | None


def parse_presses(text: str, n: int, max_presses: int) -> ParsedPresses:
    """Presses from the last ``<answer>`` block, 1 to ``max_presses`` of them, each a light of the board."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedPresses((), block.error)
    tokens = answer_tokens(block.content)
    if not tokens:
        return ParsedPresses((), "the answer names no light")
    if len(tokens) > max_presses:
        return ParsedPresses((), f"{len(tokens)} presses given, at most {max_presses} per turn")
    last = f"{string.ascii_uppercase[n - 1]}{n}"
    cells = []
    for token in tokens:
        match = _CELL.fullmatch(token)
        col = string.ascii_uppercase.find(match.group(1).upper()) if match else -1
        row = int(match.group(2)) - 1 if match else -1
        if not (0 <= col < n and 0 <= row < n):
            return ParsedPresses((), f"{shown(token)!r} is not a light (use A1 to {last})")
        cells.append(row * n + col)
    return ParsedPresses(tuple(cells), None)


def format_presses(n: int, cells: list[int] | tuple[int, ...]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>A1, C2</answer>``."""
    return "<answer>" + ", ".join(cell_name(n, cell) for cell in cells) + "</answer>"
