"""Times on a 12-hour dial: what a question asks, how answers are read, and how far one is from another.

A time is minutes past 12:00, 0 to 719 (an analog clock does not tell morning from afternoon, so
``15:45`` and ``3:45 pm`` read as ``3:45``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown

DIAL = 720
_TIME = re.compile(r"([0-9]{1,2})\s*[:.h]\s*([0-9]{2})(?:\s*([ap])\.?\s*m\.?)?", re.IGNORECASE | re.ASCII)


def spoken(minutes: int) -> str:
    """``3:05`` for 185 (12 for the hour 0)."""
    hour, minute = divmod(minutes % DIAL, 60)
    return f"{hour or 12}:{minute:02d}"


def distance(a: int, b: int) -> int:
    """Minutes between two times around the dial (0 to 360)."""
    d = (a - b) % DIAL
    return min(d, DIAL - d)


class ParsedTime(NamedTuple):
    """The time an answer gives (minutes past 12:00), else ``error`` says why."""

    minutes: int | None
    error: str | None


def parse_time(text: str) -> ParsedTime:
    """The time in the last ``<answer>`` block: ``H:MM`` (``HH:MM``, 24-hour times and am/pm accepted)."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedTime(None, block.error)
    match = _TIME.fullmatch(block.content.strip())
    if match is None:
        return ParsedTime(None, f"{shown(block.content)!r} is not a time (answer like 3:45)")
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59 or (match.group(3) and not 1 <= hour <= 12):
        return ParsedTime(None, f"{hour}:{minute:02d} is not a time of day")
    return ParsedTime((hour % 12) * 60 + minute, None)
