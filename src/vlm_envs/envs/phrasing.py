"""Plain-English phrasing the bundled envs' oracle rationales share: lists and counted nouns."""

from __future__ import annotations

from collections.abc import Iterable


def series(items: Iterable[str]) -> str:
    """Items as English lists them: ``a``, ``a and b``, ``a, b and c``."""
    words = list(items)
    if len(words) < 2:
        return "".join(words)
    return f"{', '.join(words[:-1])} and {words[-1]}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 tile``, ``3 tiles`` (``plural`` where adding an ``s`` is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
