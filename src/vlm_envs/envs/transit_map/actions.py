"""TransitMap's answer: one ride, ``<answer>ride Red line to Musdale</answer>``.

The words are read case-insensitively: an optional ``ride``, the line (``Red line``, ``the Red line``,
``Red``; ``Line 3``, ``3``), ``to``, and the stop's name. Only ASCII letters and digits name a line or a
stop, so a look-alike letter (the Kelvin sign for ``K``) names nothing. Whether the ride can be taken (the
line stops here, the stop is on it) is the env's to judge.
"""

from __future__ import annotations

from typing import NamedTuple

from vlm_envs.envs.answers import TOKEN_WRAPPING, answer_block, shown

#: Words that may stand around a line's or a stop's name and are dropped (no stop is called any of them).
_LINE_FILLER = frozenset({"the", "line"})
_STOP_FILLER = frozenset({"the", "stop", "station"})
#: The answer's own shape, as the errors quote it.
FORM = "ride <line> to <stop>"


class ParsedRide(NamedTuple):
    """The line's and the stop's names as written (stripped), or ``error`` saying why there are none."""

    line: str
    stop: str
    error: str | None


def parse_ride(text: str) -> ParsedRide:
    """The ride named in the last ``<answer>`` block."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedRide("", "", block.error)
    words = [w for w in (w.strip(TOKEN_WRAPPING + ",;:!?") for w in block.content.split()) if w]
    lower = [w.lower() for w in words]
    if lower.count("to") != 1 or lower.count("ride") > 1:
        what = "more than one ride" if lower.count("to") > 1 or lower.count("ride") > 1 else "no 'to'"
        return ParsedRide("", "", f"the answer has {what}: write one ride as {FORM}")
    if lower[0] == "ride":
        words, lower = words[1:], lower[1:]
    split = lower.index("to")
    line = [w for w, low in zip(words[:split], lower[:split], strict=True) if low not in _LINE_FILLER]
    stop = [
        w for w, low in zip(words[split + 1 :], lower[split + 1 :], strict=True) if low not in _STOP_FILLER
    ]
    if len(line) != 1 or len(stop) != 1:
        part = "line" if len(line) != 1 else "stop"
        return ParsedRide("", "", f"the answer does not name one {part}: write one ride as {FORM}")
    return ParsedRide(line[0], stop[0], None)


def plain_key(name: str) -> str | None:
    """``name`` in lower case where it is ASCII letters and digits only (how names are matched), else None."""
    return name.lower() if name.isascii() and name.isalnum() else None


def format_ride(line_title: str, stop: str) -> str:
    """An ``<answer>`` block, e.g. ``<answer>ride Red line to Musdale</answer>``."""
    return f"<answer>ride {line_title} to {stop}</answer>"


def quoted(name: str) -> str:
    """A name from a reply, safe to echo."""
    return shown(name, symbols="")
