"""Rush Hour's answers: ``<answer>B down 2, X right 3</answer>``: a vehicle's letter, a direction and how
many cells (1 when left out); moves separated by commas, semicolons or new lines."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.rush_hour.board import DIRECTIONS, NAMES

_MOVE = re.compile(
    r"([A-Za-z])\s*[:-]?\s*(up|down|left|right|u|d|l|r)\s*([0-9]{1,2})?", re.IGNORECASE | re.ASCII
)
_SEPARATORS = re.compile(r"[,;\n]+")
_LETTERS = {d[0]: d for d in DIRECTIONS}

Move = tuple[int, str, int]


class ParsedMoves(NamedTuple):
    """(vehicle index, direction, cells) per move when the answer is well formed, else ``error``."""

    moves: tuple[Move, ...]
    error: str | None


def parse_moves(text: str, max_moves: int) -> ParsedMoves:
    """Moves from the last ``<answer>`` block, 1 to ``max_moves`` of ``LETTER DIRECTION [CELLS]``. A letter
    names a vehicle whether or not it is on the board (the env refuses unknown ones as invalid moves)."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedMoves((), block.error)
    moves = []
    for item in filter(None, (part.strip() for part in _SEPARATORS.split(block.content))):
        match = _MOVE.fullmatch(item)
        if match is None:
            return ParsedMoves((), f"{shown(item)!r} is not a move (write a letter, a direction and cells)")
        letter, direction, cells = match.groups()
        word = direction.lower()
        moves.append((NAMES.index(letter.upper()), _LETTERS.get(word, word), int(cells or 1)))
        if len(moves) > max_moves:
            return ParsedMoves((), f"more than {max_moves} moves given (at most {max_moves} per turn)")
    if not moves:
        return ParsedMoves((), "the answer holds no moves")
    return ParsedMoves(tuple(moves), None)


def format_moves(moves: Sequence[Move]) -> str:
    """An answer block, e.g. ``<answer>B down 2, X right 3</answer>``."""
    return "<answer>" + ", ".join(f"{NAMES[v]} {d} {k}" for v, d, k in moves) + "</answer>"
