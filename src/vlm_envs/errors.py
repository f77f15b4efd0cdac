"""Errors said in one line: what the CLI prints after ``vlm-envs: error:``, what the server answers
with its status code, what a failed episode records."""

from __future__ import annotations


def one_line(err: BaseException | str, limit: int = 300, *, typed: bool = False) -> str:
    """``err``'s message on one line of at most ``limit`` characters, pydantic's pointer to its docs
    left out. ``typed``: an exception's message follows its type's name (``ValueError: ...``); an
    exception with no message is said by that name alone."""
    lines = (
        line for line in str(err).splitlines() if not line.lstrip().startswith("For further information")
    )
    text = " ".join(" ".join(lines).split())
    if isinstance(err, BaseException):
        name = type(err).__name__
        text = (f"{name}: {text}" if typed else text) if text else name
    return text[:limit]
