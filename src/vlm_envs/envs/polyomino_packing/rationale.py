"""PolyominoPacking's oracle rationale: how many free cells and which pieces are left, and why the next
action is the one (a placement that the pieces left can complete, or a piece taken back that the packing
aimed at moves). Cells are (row, column), counted from 1 at the top left."""

from __future__ import annotations

from collections.abc import Sequence

from vlm_envs.envs.phrasing import counted, series
from vlm_envs.envs.polyomino_packing.actions import Action, letter
from vlm_envs.envs.polyomino_packing.shapes import Cell


def cells_named(cells: Sequence[Cell]) -> str:
    """``(2,3) (2,4)``: cells counted from 1."""
    return " ".join(f"({r + 1},{c + 1})" for r, c in cells)


def explain(
    free: int,
    left: Sequence[int],
    placed: int,
    kept: int,
    action: Action,
    cells: Sequence[Cell],
    actions: int | None,
) -> str:
    """Why ``action`` (covering ``cells``, or taking them back) comes next, with ``free`` cells and the
    ``left`` pieces unplaced, ``kept`` of the ``placed`` pieces staying, ``actions`` to go (``None``:
    not known to be fewest)."""
    head = f"{counted(free, 'free cell')}, {counted(len(left), 'piece')} left"
    head += f": {series(letter(p) for p in left)}." if left else "."
    more = f"it takes {counted(actions, 'more action')}" if actions is not None else "I follow my packing"
    name = letter(action.piece)
    if action.remove:
        stay = (
            f"At most {kept} of the {placed} placed pieces can stay in a packing, and mine"
            if actions is not None
            else f"My packing (the level's own) keeps {kept} of the {placed} placed pieces and"
        )
        return f"{head} {stay} moves {name} at {cells_named(cells)}, so I take it back; {more}."
    turn = f"turned {action.degrees}° clockwise" if action.degrees else "not turned"
    if action.mirror:
        turn = f"mirrored, then {turn}" if action.degrees else "mirrored"
    rest = [letter(p) for p in left if p != action.piece]
    after = f"{series(rest)} can then fill the rest" if rest else "that fills the region"
    return f"{head} Piece {name}, {turn}, covers {cells_named(cells)}, and {after}; {more}."
