"""Sokoban's oracle rationale: where the player and the boxes are, and what the next moves do.

Made from the board and the solver's plan (the moves ``oracle_response`` plays first, then the rest).
Cells are written ``(row, column)``, counted from 0 at the top left of the board.
"""

from __future__ import annotations

import dataclasses

from vlm_envs.envs.phrasing import series
from vlm_envs.envs.sokoban.board import MOVE_NAMES, MOVES, Layout, State, apply_move


@dataclasses.dataclass
class _Segment:
    """Consecutive moves that walk, or that push one box the same way."""

    moves: str
    box: int | None = None  # the pushed box's cell before the first push
    to: int = -1  # where the player (walk) or the box (push) ends


def explain(layout: Layout, state: State, plan: str, moves_now: int) -> str:
    """Why the first ``moves_now`` moves of ``plan`` (an optimal solution from ``state``) come next."""

    def at(cell: int) -> str:
        return "({}, {})".format(*divmod(cell, layout.cols))

    off = [b for b in state.boxes if b not in layout.targets]
    free = sorted(t for t in layout.targets if t not in state.boxes)
    many = len(off) > 1
    text = [
        f"I am at {at(state.player)} (row, column from 0 at the top left).",
        f"The box{'es' if many else ''} at {series(map(at, off))} {'are' if many else 'is'} off target; "
        f"the free target{'s are' if len(free) > 1 else ' is'} at {series(map(at, free))}.",
    ]
    ends = _final_cells(layout, state, plan)
    now = _segments(layout, state, plan[:moves_now])
    steps = []
    for seg in now:
        names = ", ".join(MOVE_NAMES[MOVES.index(m)] for m in seg.moves)
        if seg.box is None:
            steps.append(f"walk {names} to {at(seg.to)}")
            continue
        goal = ends[seg.box]
        step = f"push the box at {at(seg.box)} {names} to {at(seg.to)}"
        if seg.to in layout.targets:
            step += ", onto a target"
        elif _distance(layout, seg.to, goal) < _distance(layout, seg.box, goal):
            step += f", toward the target at {at(goal)}"
        else:
            step += f", a detour on its way to the target at {at(goal)}"
        steps.append(step)
    text.append(f"Next: {', then '.join(steps)}.")
    if all(seg.box is None for seg in now):
        box, letter = next((s.box, s.moves[0]) for s in _segments(layout, state, plan) if s.box is not None)
        text.append(f"After that I push the box at {at(box)} {MOVE_NAMES[MOVES.index(letter)]}.")
    return " ".join(text)


def _segments(layout: Layout, state: State, moves: str) -> list[_Segment]:
    """``moves`` from ``state`` cut into walks and pushes of one box in one direction."""
    out: list[_Segment] = []
    for letter in moves:
        result = apply_move(layout, state, MOVES.index(letter))
        last = out[-1] if out else None
        if result.pushed:
            box = result.state.player  # the player steps where the box stood
            beyond = next(b for b in result.state.boxes if b not in state.boxes)
            if last is not None and last.box is not None and last.to == box and last.moves[-1] == letter:
                last.moves += letter
                last.to = beyond
            else:
                out.append(_Segment(letter, box, beyond))
        elif last is not None and last.box is None:
            last.moves += letter
            last.to = result.state.player
        else:
            out.append(_Segment(letter, None, result.state.player))
        state = result.state
    return out


def _final_cells(layout: Layout, state: State, plan: str) -> dict[int, int]:
    """Where each box of ``state`` (by its cell now) stands once the whole plan is played."""
    where = {b: b for b in state.boxes}  # box now -> its cell as the plan goes on
    for letter in plan:
        result = apply_move(layout, state, MOVES.index(letter))
        if result.pushed:
            beyond = next(b for b in result.state.boxes if b not in state.boxes)
            box = next(k for k, v in where.items() if v == result.state.player)
            where[box] = beyond
        state = result.state
    return where


def _distance(layout: Layout, a: int, b: int) -> int:
    """Rows plus columns between two cells."""
    (ra, ca), (rb, cb) = divmod(a, layout.cols), divmod(b, layout.cols)
    return abs(ra - rb) + abs(ca - cb)
