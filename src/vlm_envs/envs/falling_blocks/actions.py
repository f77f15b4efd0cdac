"""Falling blocks' answers: the current piece's rotation and the column of its leftmost cell,
``<answer>rotate 1, column 4</answer>`` (any case; ``rotation`` and ``col`` too, in either order)."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.falling_blocks.pieces import ROTATIONS, shape

_ROTATE = re.compile(r"\brot(?:ate|ation)?\s*[:=]?\s*([0-9]+)", re.IGNORECASE | re.ASCII)
_COLUMN = re.compile(r"\bcol(?:umn)?\s*[:=]?\s*([0-9]+)", re.IGNORECASE | re.ASCII)
_REST = re.compile(r"[\s,;.]+")
#: Digits read of a number: more is no rotation or column of any well.
_MAX_DIGITS = 3


class ParsedDrop(NamedTuple):
    """A rotation and a column (from 1) when the answer is well formed, else ``error`` says why."""

    rotation: int
    column: int
    error: str | None


def parse_drop(text: str) -> ParsedDrop:
    """The rotation and column named in the last ``<answer>`` block (not yet checked against the well)."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedDrop(0, 0, block.error)
    rotations = _ROTATE.findall(block.content)
    columns = _COLUMN.findall(block.content)
    if len(rotations) != 1 or len(columns) != 1:
        what = "rotation" if len(rotations) != 1 else "column"
        return ParsedDrop(0, 0, f"give one {what}, as in <answer>rotate 1, column 4</answer>")
    rest = _REST.sub(" ", _COLUMN.sub(" ", _ROTATE.sub(" ", block.content))).strip()
    if rest:
        return ParsedDrop(
            0, 0, f"{shown(rest.split()[0])!r} is not part of a drop (write rotate R, column C)"
        )
    if len(rotations[0]) > _MAX_DIGITS or len(columns[0]) > _MAX_DIGITS:
        return ParsedDrop(0, 0, "the rotation or column is too long a number")
    return ParsedDrop(int(rotations[0]), int(columns[0]), None)


def placement_error(piece: str, rotation: int, column: int, width: int) -> str | None:
    """Why ``piece`` at ``rotation`` with its leftmost cell at ``column`` (from 1) is not a drop into a well
    ``width`` columns wide; None where it is one."""
    if not 0 <= rotation < ROTATIONS:
        return f"rotate {rotation} is not a rotation (0 to {ROTATIONS - 1})"
    turned = shape(piece, rotation)
    last = width - turned.width + 1
    if not 1 <= column <= last:
        wide = f"{turned.width} column{'s' if turned.width > 1 else ''} wide"
        return (
            f"column {column} puts the {piece} outside the well: at rotate {rotation} it is {wide}, so its "
            f"leftmost cell goes in column 1 to {last}"
        )
    return None


def format_drop(rotation: int, column: int) -> str:
    """An ``<answer>`` block, e.g. ``<answer>rotate 1, column 4</answer>`` (``column`` from 1)."""
    return f"<answer>rotate {rotation}, column {column}</answer>"
