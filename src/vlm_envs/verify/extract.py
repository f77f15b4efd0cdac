"""Find the answer in a model's text: the last ``\\boxed{...}``, an ``Answer:`` line, or the whole text."""

from __future__ import annotations

import itertools
import re

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_MARK = re.compile(r"(?:final\s+answer|answer\s+is|answer)\s*[:=]?", re.IGNORECASE)
#: Text allowed between two boxed answers for them to count as one hedged answer.
_HEDGE_GLUE = re.compile(r"^[\s$]*(?:,|;|or|and|/|\\text\{\s*or\s*\}|\\quad|\\lor)?[\s$]*$", re.IGNORECASE)


def _group_end(text: str, start: int) -> int | None:
    """Index just past the ``}`` closing the group that opens before ``start``, or None if unbalanced."""
    depth = 1
    i = start
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every balanced, outermost ``\\boxed{...}`` in ``text``, in order."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while True:
        m = _BOXED.search(text, pos)
        if m is None:
            return spans
        end = _group_end(text, m.end())
        if end is None:
            return spans
        spans.append((m.start(), end))
        pos = end


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (brace-balanced), or None if there is none.

    A trailing ``\\boxed{`` that never closes (a truncated answer) gives None rather than an earlier box.
    """
    last = None
    for m in _BOXED.finditer(text):
        last = m
    if last is None:
        return None
    end = _group_end(text, last.end())
    if end is None:
        return None
    # The last opening may sit inside an outer box (\boxed{\boxed{5}}): the innermost content is the answer.
    return text[last.end() : end - 1]


def answer_region(text: str) -> tuple[str, bool]:
    """The part of ``text`` that holds the answer, and whether several boxed answers hedge each other."""
    openings = list(_BOXED.finditer(text))
    if openings:
        boxed = extract_boxed(text)
        if boxed is None:  # truncated box: hand on the unbalanced text, which will not parse
            return text[openings[-1].start() :], False
        spans = boxed_spans(text)
        glue = [text[a[1] : b[0]] for a, b in itertools.pairwise(spans)]
        distinct = {_inner(text[s:e]) for s, e in spans}
        return boxed, len(distinct) > 1 and all(_HEDGE_GLUE.match(g) for g in glue)
    marks = list(_ANSWER_MARK.finditer(text))
    if marks:
        rest = text[marks[-1].end() :].strip()
        return rest.split("\n", 1)[0], False
    return text, False


def _inner(boxed: str) -> str:
    """Strip ``\\boxed{`` and the final ``}`` from one boxed span."""
    m = _BOXED.match(boxed)
    return boxed[m.end() : -1].strip() if m else boxed
