"""Reading an order of frames from a reply: ``<answer>C, A, D, B</answer>`` (``C A D B``, ``CADB`` and
``C -> A -> D -> B`` too), judged against the frames' letters with bounded work."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown
from vlm_envs.envs.phrasing import series

#: Arrows a model may write between letters (read as separators).
_ARROWS = re.compile(r"-+>|=+>|→|⟶|>|-")
#: ASCII letters only, matched before upper-casing (``"ı".upper()`` is ``"I"``, ``"ﬀ".upper()`` is ``"FF"``).
_LETTERS = re.compile(r"[A-Za-z]+", re.ASCII)


class ParsedOrder(NamedTuple):
    """The letters an answer gives, in its order, else ``error`` says why there is none."""

    order: tuple[str, ...] | None
    error: str | None


def parse_order(text: str, letters: Sequence[str]) -> ParsedOrder:
    """The order in the reply's last ``<answer>`` block: every one of ``letters`` exactly once."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedOrder(None, block.error)
    tokens = answer_tokens(_ARROWS.sub(" ", block.content))
    if len(tokens) == 1 and _LETTERS.fullmatch(tokens[0]):
        tokens = list(tokens[0])  # CADB
    for token in tokens:
        if not (len(token) == 1 and _LETTERS.fullmatch(token)):
            return ParsedOrder(None, f"{shown(token)!r} is not a frame letter")
    tokens = [token.upper() for token in tokens]
    unknown = sorted(set(tokens) - set(letters))
    if unknown:
        return ParsedOrder(None, f"there is no frame {series(unknown)} (the frames are {', '.join(letters)})")
    twice = sorted(letter for letter, n in Counter(tokens).items() if n > 1)
    if twice:
        return ParsedOrder(None, f"frame {series(twice)} is named more than once")
    missing = [letter for letter in letters if letter not in tokens]
    if missing:
        return ParsedOrder(None, f"frame {series(missing)} is missing: name all {len(letters)} frames once")
    return ParsedOrder(tuple(tokens), None)
