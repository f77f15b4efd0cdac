"""Minesweeper's oracle rationale: how much is still hidden, and which shown number proves each cell it
reveals safe (see :mod:`vlm_envs.envs.minesweeper.deduce` for the two rules)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from vlm_envs.envs.minesweeper.board import Cell, Field, name, neighbours
from vlm_envs.envs.minesweeper.deduce import Reason
from vlm_envs.envs.phrasing import counted, series


def explain(
    field: Field, hidden: int, cells: Sequence[Cell], reasons: Mapping[Cell, Reason], mines: Set[Cell]
) -> str:
    """Why ``cells`` are safe to reveal: grouped by the number (or pair of numbers) that proves them;
    ``mines`` are the mines the shown numbers prove."""
    cols, numbers = field.cols, field.numbers
    verb = "is" if hidden == 1 else "are"
    text = f"{counted(hidden, 'cell')} {verb} hidden, {len(field.mines)} of them mines."
    groups: dict[Reason | None, list[Cell]] = {}
    for cell in cells:
        groups.setdefault(reasons.get(cell), []).append(cell)
    parts = []
    for reason, group in groups.items():
        names = series(name(c, cols) for c in group)
        verb = "is" if len(group) == 1 else "are"
        if reason is None:
            parts.append(f"no number proves a cell safe, but I know {names} {verb} safe")
            continue
        outer = f"the {numbers[reason.cell]} at {name(reason.cell, cols)}"
        if reason.inner is None:
            found = [name(c, cols) for c in neighbours(field.rows, field.cols)[reason.cell] if c in mines]
            its = (
                f"its mine at {found[0]}" if len(found) == 1 else f"its {len(found)} mines at {series(found)}"
            )
            parts.append(f"{outer} already has {its}, so {names} {verb} safe")
        else:
            inner = f"the {numbers[reason.inner]} at {name(reason.inner, cols)}"
            parts.append(f"{outer} has all its unknown mines next to {inner} too, so {names} {verb} safe")
    said = "; ".join(parts)
    return f"{text} {said[0].upper()}{said[1:]}."
