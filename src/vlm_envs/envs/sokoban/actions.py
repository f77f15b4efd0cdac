"""Sokoban's answers: ``<answer>Up, Left</answer>``, words Up/Down/Left/Right or letters U/D/L/R
(any case), separated by commas, semicolons, spaces or newlines."""

from __future__ import annotations

from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown
from vlm_envs.envs.sokoban.board import MOVE_NAMES

_WORDS = {name.lower(): i for i, name in enumerate(MOVE_NAMES)}
_WORDS.update({name[0].lower(): i for i, name in enumerate(MOVE_NAMES)})


class ParsedAnswer(NamedTuple):
    """Directions (indices into ``MOVES``) when the answer is well formed, else ``error`` says why."""

    moves: tuple[int, ...]
    error: str | None


def parse_answer(text: str, max_actions: int) -> ParsedAnswer:
    """Moves from the last ``<answer>...</answer>`` block, 1 to ``max_actions`` of them."""
    block = answer_block(text, allow_empty=True)
    if block.error is not None:
        return ParsedAnswer((), block.error)
    tokens = answer_tokens(block.content)
    if not tokens:
        return ParsedAnswer((), "the answer holds no moves")
    moves = []
    for token in tokens:
        move = _WORDS.get(token.lower())
        if move is None:
            return ParsedAnswer(
                (), f"{shown(token, symbols='_-')!r} is not a move (use Up, Down, Left or Right)"
            )
        moves.append(move)
    if len(moves) > max_actions:
        return ParsedAnswer((), f"{len(moves)} moves given, at most {max_actions} per turn")
    return ParsedAnswer(tuple(moves), None)


def format_answer(moves: str) -> str:
    """An ``<answer>`` block for move letters over ``UDLR``, e.g. ``<answer>Up, Left</answer>``."""
    return "<answer>" + ", ".join(MOVE_NAMES["UDLR".index(m)] for m in moves) + "</answer>"
