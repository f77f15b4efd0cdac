"""SlidingPuzzle's answers: ``<answer>Up, Left, Down</answer>``, the directions tiles slide into the gap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown
from vlm_envs.envs.sliding_puzzle.board import MOVE_NAMES

_WORDS = {name.lower(): i for i, name in enumerate(MOVE_NAMES)} | {
    name[0].lower(): i for i, name in enumerate(MOVE_NAMES)
}


class ParsedMoves(NamedTuple):
    """Move ids when the answer is well formed, else ``error`` says why."""

    moves: tuple[int, ...]
    error: str | None


def parse_moves(text: str, max_moves: int) -> ParsedMoves:
    """Moves from the last ``<answer>`` block: 1 to ``max_moves`` of Up/Down/Left/Right (or U/D/L/R),
    separated by commas, semicolons, spaces or newlines."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedMoves((), block.error)
    moves = []
    for token in answer_tokens(block.content):
        move = _WORDS.get(token.lower())
        if move is None:
            return ParsedMoves((), f"{shown(token)!r} is not a move (use Up, Down, Left or Right)")
        moves.append(move)
    if not moves:
        return ParsedMoves((), "the answer holds no moves")
    if len(moves) > max_moves:
        return ParsedMoves((), f"{len(moves)} moves given, at most {max_moves} per turn")
    return ParsedMoves(tuple(moves), None)


def format_moves(moves: Sequence[int]) -> str:
    """An answer block, e.g. ``<answer>Up, Left</answer>``."""
    return "<answer>" + ", ".join(MOVE_NAMES[m] for m in moves) + "</answer>"
