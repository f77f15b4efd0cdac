"""Tower of Hanoi's answers: moves from peg to peg, ``<answer>A->C, A->B</answer>`` (``A-C``, ``A to C``
and ``A→C`` too, any case), separated by commas, semicolons, spaces or newlines."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown
from vlm_envs.envs.tower_of_hanoi.pegs import Move, format_move

_MOVE = re.compile(r"([ABCabc])\s*(?:->|→|-|\s+to\s+)\s*([ABCabc])")
_SEPARATORS = re.compile(r"[,;\s]+")


class ParsedMoves(NamedTuple):
    """Moves (source, destination peg indices) when the answer is well formed, else ``error`` says why."""

    moves: tuple[Move, ...]
    error: str | None


def parse_moves(text: str, max_moves: int) -> ParsedMoves:
    """Moves from the last ``<answer>`` block, 1 to ``max_moves`` of them."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedMoves((), block.error)
    found = list(_MOVE.finditer(block.content))
    rest = _SEPARATORS.sub(" ", _MOVE.sub(" ", block.content)).strip()
    if rest:
        return ParsedMoves((), f"{shown(rest.split()[0])!r} is not a move (write moves as A->C)")
    if not found:
        return ParsedMoves((), "the answer holds no moves")
    if len(found) > max_moves:
        return ParsedMoves((), f"{len(found)} moves given, at most {max_moves} per turn")
    moves = tuple(("ABC".index(m.group(1).upper()), "ABC".index(m.group(2).upper())) for m in found)
    return ParsedMoves(moves, None)


def format_moves(moves: list[Move] | tuple[Move, ...]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>A->C, A->B</answer>``."""
    return "<answer>" + ", ".join(format_move(m) for m in moves) + "</answer>"
