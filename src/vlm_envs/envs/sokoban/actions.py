"""Parsing moves out of a model's response: ``<answer>Up, Left</answer>`` (hostile input)."""

from __future__ import annotations

import re
from collections import deque
from typing import NamedTuple

from vlm_envs.envs.sokoban.board import MOVE_NAMES

#: Longest ``<answer>`` content read; anything longer is an invalid-format turn.
MAX_ANSWER_CHARS = 2000
_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
_SEPARATORS = re.compile(r"[,;\s]+")
_WORDS = {name.lower(): i for i, name in enumerate(MOVE_NAMES)}
_WORDS.update({name[0].lower(): i for i, name in enumerate(MOVE_NAMES)})
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_STRIP = "\"'`.()[]{}"


class ParsedAnswer(NamedTuple):
    """Directions (indices into ``MOVES``) when the answer is well formed, else ``error`` says why."""

    moves: tuple[int, ...]
    error: str | None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = deque(pattern.finditer(text), maxlen=1)  # linear in len(text), constant memory
    return last[0] if last else None


def _shown(token: str) -> str:
    """A token safe to echo: letters/digits only (no placeholders or template tokens), at most 20."""
    safe = _UNSAFE.sub("?", token)
    return safe if len(safe) <= 20 else safe[:20] + "..."


def parse_answer(text: str, max_actions: int) -> ParsedAnswer:
    """Moves from the last ``<answer>...</answer>`` block (case-insensitive; words Up/Down/Left/Right
    or letters U/D/L/R, separated by commas, semicolons, spaces or newlines), 1 to ``max_actions``."""
    if not isinstance(text, str):
        return ParsedAnswer((), f"the response is a {type(text).__name__}, not text")
    close = _last_match(_CLOSE, text)
    opened = _last_match(_OPEN, text[: close.start()]) if close else None
    if close is None or opened is None:
        return ParsedAnswer((), "no <answer>...</answer> block found")
    content = text[opened.end() : close.start()]
    if len(content) > MAX_ANSWER_CHARS:
        return ParsedAnswer((), f"the answer is {len(content)} characters long (at most {MAX_ANSWER_CHARS})")
    tokens = [t.strip(_STRIP) for t in _SEPARATORS.split(content.strip()) if t.strip(_STRIP)]
    if not tokens:
        return ParsedAnswer((), "the answer holds no moves")
    moves = []
    for token in tokens:
        move = _WORDS.get(token.lower())
        if move is None:
            return ParsedAnswer((), f"{_shown(token)!r} is not a move (use Up, Down, Left or Right)")
        moves.append(move)
    if len(moves) > max_actions:
        return ParsedAnswer((), f"{len(moves)} moves given, at most {max_actions} per turn")
    return ParsedAnswer(tuple(moves), None)


def format_answer(moves: str) -> str:
    """An ``<answer>`` block for move letters over ``UDLR``, e.g. ``<answer>Up, Left</answer>``."""
    return "<answer>" + ", ".join(MOVE_NAMES["UDLR".index(m)] for m in moves) + "</answer>"
