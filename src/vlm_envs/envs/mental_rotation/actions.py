"""MentalRotation's answers: quarter turns ``<answer>x+ y- z+</answer>``, or ``same``/``mirror``."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import TOKEN_WRAPPING, answer_block, answer_tokens, shown

_TURN = re.compile(r"[xyz][+-]")
_MINUS = str.maketrans({"\u2212": "-", "\u2013": "-"})
MIRROR_WORDS = ("same", "mirror")


class ParsedTurns(NamedTuple):
    """Turn names (``x+`` ... ``z-``) when the answer is well formed, else ``error`` says why."""

    turns: tuple[str, ...]
    error: str | None


def parse_turns(text: str, max_turns: int) -> ParsedTurns:
    """1 to ``max_turns`` quarter turns from the last ``<answer>`` block (``x+``, ``Y-``, ...)."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedTurns((), block.error)
    tokens = [t.lower() for t in answer_tokens(block.content.translate(_MINUS))]
    for token in tokens:
        if not _TURN.fullmatch(token):
            return ParsedTurns((), f"{shown(token)!r} is not a turn (use x+, x-, y+, y-, z+ or z-)")
    if not tokens:
        return ParsedTurns((), "the answer holds no turns")
    if len(tokens) > max_turns:
        return ParsedTurns((), f"{len(tokens)} turns given, at most {max_turns} per reply")
    return ParsedTurns(tuple(tokens), None)


def parse_word(text: str) -> tuple[str | None, str | None]:
    """``same`` or ``mirror`` from the last ``<answer>`` block, else (None, why)."""
    block = answer_block(text)
    if block.error is not None:
        return None, block.error
    word = block.content.strip(TOKEN_WRAPPING + " ").lower()
    if word not in MIRROR_WORDS:
        return None, f"{shown(word)!r} is neither 'same' nor 'mirror'"
    return word, None
