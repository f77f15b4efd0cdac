"""Jigsaw's answers: ``<answer>swap(1,5) swap(2,3)</answer>`` (positions numbered from 1)."""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, shown

_SWAP = re.compile(r"swap\s*\(\s*([0-9]{1,3})\s*,\s*([0-9]{1,3})\s*\)", re.IGNORECASE | re.ASCII)
_SEPARATORS = re.compile(r"[\s,;]*")


class ParsedSwaps(NamedTuple):
    """0-based position pairs when the answer is well formed, else ``error`` says why."""

    swaps: tuple[tuple[int, int], ...]
    error: str | None


def parse_swaps(text: str, tiles: int, max_swaps: int) -> ParsedSwaps:
    """Swaps from the last ``<answer>`` block: 1 to ``max_swaps`` of ``swap(a,b)``, positions 1..tiles."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedSwaps((), block.error)
    content, at, swaps = block.content, 0, []
    while at < len(content):
        at = _SEPARATORS.match(content, at).end()  # type: ignore[union-attr]
        if at >= len(content):
            break
        match = _SWAP.match(content, at)
        if match is None:
            return ParsedSwaps((), f"expected swap(a,b) at {shown(content[at : at + 12])!r}")
        a, b = int(match.group(1)), int(match.group(2))
        if not (1 <= a <= tiles and 1 <= b <= tiles):
            return ParsedSwaps((), f"swap({a},{b}) names a position outside 1..{tiles}")
        if a == b:
            return ParsedSwaps((), f"swap({a},{b}) swaps a position with itself")
        swaps.append((a - 1, b - 1))
        if len(swaps) > max_swaps:
            return ParsedSwaps((), f"more than {max_swaps} swaps given (at most {max_swaps} per turn)")
        at = match.end()
    if not swaps:
        return ParsedSwaps((), "the answer holds no swaps")
    return ParsedSwaps(tuple(swaps), None)


def format_swaps(swaps: list[tuple[int, int]] | tuple[tuple[int, int], ...]) -> str:
    """An answer block for 0-based position pairs, e.g. ``<answer>swap(1,5) swap(2,3)</answer>``."""
    return "<answer>" + " ".join(f"swap({a + 1},{b + 1})" for a, b in swaps) + "</answer>"
