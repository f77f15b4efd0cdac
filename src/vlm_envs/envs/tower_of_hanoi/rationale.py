"""Tower of Hanoi's oracle rationale: the largest disk not yet on the goal peg, the plan around it, the
moves a shortest solution still takes, and the ones made now."""

from __future__ import annotations

from vlm_envs.envs.phrasing import counted
from vlm_envs.envs.tower_of_hanoi.pegs import PEG_NAMES, Move, Position, format_move


def explain(pegs: Position, goal: int, solution: list[Move], now: list[Move]) -> str:
    """The rationale for making ``now``, the first moves of the shortest ``solution`` from ``pegs``."""
    disk = max(d for d, p in enumerate(pegs) if p != goal)
    third, to = 3 - pegs[disk] - goal, PEG_NAMES[goal]
    text = f"Goal: all {counted(len(pegs), 'disk')} on {PEG_NAMES[goal]}. "
    text += f"The largest disk not there is {disk + 1}, on {PEG_NAMES[pegs[disk]]}: "
    smaller = {1: "disk 1", 2: "disks 1 and 2"}.get(disk, f"disks 1 to {disk}")
    if disk == 0:
        text += f"it moves straight to {to}."
    elif all(pegs[d] == third for d in range(disk)):
        text += f"{smaller} {'is' if disk == 1 else 'are'} on {PEG_NAMES[third]}, so it moves to {to}."
    else:
        goes = "goes" if disk == 1 else "go"
        text += f"{smaller} {goes} to {PEG_NAMES[third]} first, then it moves to {to}."
    text += f" A shortest solution takes {counted(len(solution), 'more move')}; now: "
    return text + ", ".join(format_move(m) for m in now) + "."
