"""Minesweeper's rules: a rows x cols field, cells numbered row-major; a safe cell shows how many of its up
to eight neighbours hold mines, and revealing a 0 reveals its neighbours too (a flood)."""

from __future__ import annotations

import dataclasses
import functools
import string

Cell = int


@dataclasses.dataclass(frozen=True)
class Field:
    """Where the mines are; ``numbers[c]`` is the count of mines next to ``c`` (its own mine not counted)."""

    rows: int
    cols: int
    mines: frozenset[Cell]

    @functools.cached_property
    def numbers(self) -> tuple[int, ...]:
        nbrs = neighbours(self.rows, self.cols)
        return tuple(sum(n in self.mines for n in nbrs[c]) for c in range(self.rows * self.cols))

    @property
    def safe_cells(self) -> int:
        return self.rows * self.cols - len(self.mines)


@functools.lru_cache(maxsize=64)
def neighbours(rows: int, cols: int) -> tuple[tuple[Cell, ...], ...]:
    """Per cell, its up to eight neighbours in row-major order."""
    out = []
    for r in range(rows):
        for c in range(cols):
            out.append(
                tuple(
                    rr * cols + cc
                    for rr in range(r - 1, r + 2)
                    for cc in range(c - 1, c + 2)
                    if (rr, cc) != (r, c) and 0 <= rr < rows and 0 <= cc < cols
                )
            )
    return tuple(out)


def flood(field: Field, cell: Cell, revealed: set[Cell]) -> set[Cell]:
    """The safe ``cell`` and, through 0s, every cell a reveal of it opens; adds them to ``revealed`` and
    returns the ones that were new."""
    nbrs, numbers = neighbours(field.rows, field.cols), field.numbers
    new, stack = set(), [cell]
    while stack:
        at = stack.pop()
        if at in revealed:
            continue
        revealed.add(at)
        new.add(at)
        if numbers[at] == 0:
            stack.extend(n for n in nbrs[at] if n not in revealed)
    return new


def name(cell: Cell, cols: int) -> str:
    """A cell as the board labels it: its column letter and row number from 1, e.g. ``C4``."""
    r, c = divmod(cell, cols)
    return f"{string.ascii_uppercase[c]}{r + 1}"
