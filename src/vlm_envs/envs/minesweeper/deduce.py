"""What the numbers on a Minesweeper board prove, by the two rules a careful player uses, until nothing new
follows:

- one number: when the mines it counts are all known, its other hidden neighbours are safe; when its hidden
  neighbours are exactly as many as its unknown mines, they are all mines;
- two numbers: when the unknown neighbours of one lie all among those of another, the other's extra cells
  hold the difference of their unknown mines: none (all safe) or one per cell (all mines).

Used by the generator (a board is kept only when these rules clear it from the first reveal), by the oracle
(it reveals only cells the shown numbers prove safe) and by its rationale.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vlm_envs.envs.minesweeper.board import Cell, Field, flood, neighbours


@dataclasses.dataclass(frozen=True)
class Reason:
    """Why a cell is proven safe: the number at ``cell`` (alone, or with the number at ``inner``, whose
    unknown neighbours lie among its own and hold as many unknown mines)."""

    cell: Cell
    inner: Cell | None = None


@dataclasses.dataclass
class Proof:
    """Cells proven safe (each with its reason) and cells proven mines, beyond what was known."""

    safe: dict[Cell, Reason]
    mines: set[Cell]


def deduce(rows: int, cols: int, shown: Mapping[Cell, int], known_mines: set[Cell] | None = None) -> Proof:
    """What follows from the numbers ``shown`` (revealed cell -> its number) and ``known_mines``."""
    nbrs = neighbours(rows, cols)
    mines = set(known_mines or ())
    safe: dict[Cell, Reason] = {}
    changed = True
    while changed:
        changed = False
        constraints = {}
        for cell, number in shown.items():
            unknown = frozenset(n for n in nbrs[cell] if n not in shown and n not in mines and n not in safe)
            if unknown:
                constraints[cell] = (unknown, number - sum(n in mines for n in nbrs[cell]))
        for cell, (unknown, left) in constraints.items():
            if left == 0:
                changed |= _mark_safe(safe, unknown, Reason(cell))
            elif left == len(unknown):
                changed |= bool(unknown - mines)
                mines |= unknown
        if changed:
            continue
        for outer, (big, big_left) in constraints.items():
            for inner in {c for n in big for c in nbrs[n] if c in constraints and c != outer}:
                small, small_left = constraints[inner]
                if not small < big:
                    continue
                extra = big - small
                if big_left == small_left:
                    changed |= _mark_safe(safe, extra, Reason(outer, inner))
                elif big_left - small_left == len(extra):
                    changed |= bool(extra - mines)
                    mines |= extra
    return Proof(safe, mines - set(known_mines or ()))


def _mark_safe(safe: dict[Cell, Reason], cells: frozenset[Cell], reason: Reason) -> bool:
    new = [c for c in sorted(cells) if c not in safe]
    for c in new:
        safe[c] = reason
    return bool(new)


def clear_by_deduction(field: Field, revealed: set[Cell]) -> list[Cell]:
    """Play the rules from ``revealed`` (changed in place) until the field is cleared or they are stuck;
    the safe cells still hidden when stuck (none: the rules clear it)."""
    mines: set[Cell] = set()
    numbers = field.numbers
    while len(revealed) < field.safe_cells:
        proof = deduce(field.rows, field.cols, {c: numbers[c] for c in revealed}, mines)
        mines |= proof.mines
        if not proof.safe:
            break
        for cell in proof.safe:
            flood(field, cell, revealed)
    return [c for c in range(field.rows * field.cols) if c not in revealed and c not in field.mines]
