"""The ``<answer>...</answer>`` block of a model's reply, read with bounded work (hostile input).

Shared by the puzzle envs that answer in this form; each env parses the block's content itself, or, where
its answer is a list of named actions, with :func:`parse_named_actions`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import NamedTuple

#: Longest ``<answer>`` content read; anything longer is an invalid-format turn.
MAX_ANSWER_CHARS = 2000
_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
#: What separates the tokens of an answer: commas, semicolons and whitespace.
_SEPARATORS = re.compile(r"[,;\s]+")
#: Quotes, full stops and brackets a model may wrap a token in (stripped from each token).
TOKEN_WRAPPING = "\"'`.()[]{}"


class AnswerBlock(NamedTuple):
    """The content of the last ``<answer>`` block, or ``error`` saying why there is none."""

    content: str
    error: str | None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = deque(pattern.finditer(text), maxlen=1)  # linear in len(text), constant memory
    return last[0] if last else None


def answer_block(text: str, max_chars: int = MAX_ANSWER_CHARS, allow_empty: bool = False) -> AnswerBlock:
    """The last ``<answer>...</answer>`` block's content (case-insensitive tags), at most
    ``max_chars`` long, stripped of surrounding whitespace; an empty one is an error unless
    ``allow_empty`` (the env then says what the answer lacks)."""
    close = _last_match(_CLOSE, text)
    opened = _last_match(_OPEN, text[: close.start()]) if close else None
    if close is None or opened is None:
        return AnswerBlock("", "no <answer>...</answer> block found")
    content = text[opened.end() : close.start()]
    if len(content) > max_chars:
        return AnswerBlock("", f"the answer is {len(content)} characters long (at most {max_chars})")
    content = content.strip()
    if not content and not allow_empty:
        return AnswerBlock("", "the answer is empty")
    return AnswerBlock(content, None)


def answer_tokens(content: str) -> list[str]:
    """The tokens of an answer's content: split at commas, semicolons and whitespace, each stripped of
    :data:`TOKEN_WRAPPING`, empty ones dropped."""
    return [t for t in (t.strip(TOKEN_WRAPPING) for t in _SEPARATORS.split(content)) if t]


def shown(token: str, limit: int = 20, symbols: str = "_+-") -> str:
    """A piece of model text safe to echo: letters, digits and ``symbols`` only (no placeholders or
    template tokens; anything else becomes ``?``), at most ``limit`` characters."""
    safe = re.sub(f"[^A-Za-z0-9{re.escape(symbols)}]", "?", token)
    return safe if len(safe) <= limit else safe[:limit] + "..."


class ParsedActions(NamedTuple):
    """Action indices when the answer is well formed, else ``error`` says why."""

    actions: tuple[int, ...]
    error: str | None


def parse_named_actions(
    text: str,
    words: Mapping[str, int],
    max_actions: int,
    names: str,
    spelling: Callable[[str], str] = str,
) -> ParsedActions:
    """The actions of the last ``<answer>`` block, 1 to ``max_actions`` of them: its tokens looked up
    (lower-cased) in ``words``, after ``spelling`` joins an env's two-word names; ``names`` lists the
    actions for the error of a token that is none."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedActions((), block.error)
    tokens = answer_tokens(spelling(block.content))
    if not tokens:
        return ParsedActions((), "the answer holds no actions")
    if len(tokens) > max_actions:
        return ParsedActions((), f"{len(tokens)} actions given, at most {max_actions} per turn")
    actions = []
    for token in tokens:
        action = words.get(token.lower())
        if action is None:
            return ParsedActions((), f"{shown(token)!r} is not an action (use {names})")
        actions.append(action)
    return ParsedActions(tuple(actions), None)
