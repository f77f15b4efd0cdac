"""Connect Four's answers: the column to drop a stone into, numbered from 1 at the left as the image shows,
``<answer>4</answer>`` (``column 4`` too)."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown

_COLUMN = re.compile(r"(?:col(?:umn)?\s*)?([0-9]{1,4})", re.IGNORECASE | re.ASCII)


class ParsedColumn(NamedTuple):
    """The column named (0 the leftmost; it may be off the board) when the answer is one number, else
    ``error`` says why."""

    column: int | None
    error: str | None


def parse_column(text: str) -> ParsedColumn:
    """The column of the last ``<answer>`` block: one number, ``column`` before it allowed."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedColumn(None, block.error)
    match = _COLUMN.fullmatch(block.content.strip("\"'`.()[]{} "))
    if match is None:
        return ParsedColumn(None, f"{shown(block.content)!r} is not a column number")
    return ParsedColumn(int(match.group(1)) - 1, None)


def format_column(column: int) -> str:
    """An ``<answer>`` block naming ``column`` (0 the leftmost) as the image numbers it."""
    return f"<answer>{column + 1}</answer>"
