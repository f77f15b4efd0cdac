"""Minesweeper fields that the numbers alone clear: no guess is ever needed.

The first reveal is made for the player, at a start cell drawn from the seed whose neighbourhood holds no
mine (so it opens an area), and a field whose opening would clear it is drawn again (when every draw does,
on fields with very few mines, the last one starts from a numbered safe cell instead). A field is kept
when :func:`~vlm_envs.envs.minesweeper.deduce.clear_by_deduction` clears it from that opening. Among
:data:`ATTEMPTS` draws the first such field wins; when none does (dense fields), the draw needing fewest
extra openings is kept, and those safe cells (``hints``) are revealed at the start too, one at each point
where the rules were stuck, so every episode is still cleared by reasoning.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vlm_envs.envs.minesweeper.board import Cell, Field, flood, neighbours
from vlm_envs.envs.minesweeper.deduce import clear_by_deduction

#: Fields drawn before the one needing fewest hints is taken.
ATTEMPTS = 12


@dataclasses.dataclass(frozen=True)
class Level:
    field: Field
    start: Cell
    hints: tuple[Cell, ...]
    attempt: int

    def opening(self) -> set[Cell]:
        """The cells revealed when the episode starts: the start's flood and the hints'."""
        revealed: set[Cell] = set()
        for cell in (self.start, *self.hints):
            flood(self.field, cell, revealed)
        return revealed


def _hints(field: Field, start: Cell, most: int) -> tuple[Cell, ...] | None:
    """The safe cells to reveal whenever the rules are stuck (first one next to the open area), or None
    when more than ``most`` would be needed."""
    revealed: set[Cell] = set()
    flood(field, start, revealed)
    hints: list[Cell] = []
    nbrs = neighbours(field.rows, field.cols)
    while stuck := clear_by_deduction(field, revealed):
        if len(hints) >= most:
            return None
        edge = [c for c in stuck if any(n in revealed for n in nbrs[c])]
        hint = (edge or stuck)[0]
        hints.append(hint)
        flood(field, hint, revealed)
    return tuple(hints)


def generate(rows: int, cols: int, mines: int, rng: np.random.Generator) -> Level:
    """A field of ``rows`` x ``cols`` with ``mines`` mines, its start cell and any hints it needs."""
    best: Level | None = None
    for attempt in range(ATTEMPTS):
        start = int(rng.integers(rows * cols))
        keep_clear = {start, *neighbours(rows, cols)[start]}
        free = [c for c in range(rows * cols) if c not in keep_clear]
        placed = rng.choice(len(free), size=mines, replace=False)
        field = Field(rows, cols, frozenset(free[int(i)] for i in placed))
        if len(flood(field, start, set())) == field.safe_cells:
            if attempt < ATTEMPTS - 1 or best is not None:
                continue
            numbered = [c for c in range(rows * cols) if c not in field.mines and field.numbers[c]]
            start = numbered[int(rng.integers(len(numbered)))]
        most = rows * cols if best is None else len(best.hints) - 1
        hints = _hints(field, start, most)
        if hints is not None:
            best = Level(field, start, hints, attempt)
            if not hints:
                return best
    assert best is not None
    return best
