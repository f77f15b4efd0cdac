"""Find the answer in a model's text: the last ``\\boxed{...}``, an ``Answer:`` line, or the whole text."""

from __future__ import annotations

import itertools
import re

#: Whitespace allowed between ``\boxed`` and its ``{`` (bounded: a megabyte of spaces is no answer).
_GAP = r"\s{0,32}"
_BOXED = re.compile(rf"\\(?:boxed|fbox){_GAP}\{{")
_ANSWER_MARK = re.compile(r"(?:final\s+answer|answer\s+is|answer)\s*[:=]?", re.IGNORECASE)
#: Text allowed between two boxed answers for them to count as one hedged answer.
_HEDGE_GLUE = re.compile(r"^[\s$]*(?:,|;|or|and|/|\\text\{\s*or\s*\}|\\quad|\\lor)?[\s$]*$", re.IGNORECASE)
#: Longest ``\boxed{}`` content :func:`extract_boxed` reads; a longer one is returned cut one character past
#: this, so that it stays over every answer cap (graded "too long") and no caller copies megabytes.
MAX_BOXED_CHARS = 4096
_KEYWORDS = ("\\boxed", "\\fbox")
_OPEN_BRACE = re.compile(rf"{_GAP}\{{")
#: Mentions of ``\boxed`` without a ``{`` tried from the end before concluding there is no box.
_MAX_MENTIONS = 64


def _group_end(text: str, start: int, stop: int | None = None) -> int | None:
    """Index just past the ``}`` closing the group that opens before ``start``, or None if it does not
    close before ``stop`` (default: the end of ``text``)."""
    depth = 1
    i = start
    n = len(text) if stop is None else min(stop, len(text))
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


def extract_boxed(text: str, max_chars: int = MAX_BOXED_CHARS) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (brace-balanced), or None if there is none.

    A trailing ``\\boxed{`` that never closes (a truncated answer) gives None rather than an earlier box.
    Content longer than ``max_chars`` (closed or not) comes back cut to ``max_chars + 1`` characters, so
    any text is read in time linear in its length with at most ``max_chars`` steps of Python.
    """
    start = _last_opening(text)
    if start is None:
        return None
    stop = start + max_chars + 1
    end = _group_end(text, start, stop)
    if end is None:
        return text[start:stop] if stop <= len(text) else None
    # The last opening may sit inside an outer box (\boxed{\boxed{5}}): the innermost content is the answer.
    return text[start : end - 1]


def _last_opening(text: str) -> int | None:
    """Index just past the ``{`` of the last ``\\boxed{`` / ``\\fbox{`` (a ``_BOXED`` match), found from
    the end with ``str.rfind``; gives up (None) after ``_MAX_MENTIONS`` mentions that open no box."""
    found = {keyword: text.rfind(keyword) for keyword in _KEYWORDS}
    for _ in range(_MAX_MENTIONS):
        keyword = max(found, key=found.__getitem__)
        at = found[keyword]
        if at < 0:
            return None
        opening = _OPEN_BRACE.match(text, at + len(keyword))
        if opening:
            return opening.end()
        found[keyword] = text.rfind(keyword, 0, at)
    return None


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
