"""KeysDoors' oracle rationale: the keys carried, the lava next to the player, the next sub-goal of the
shortest way (a key to pick up, a door to open, or the goal) and where it is, and the actions made now.

The sub-goal is the first ``Pickup`` or ``Open`` of the shortest way ``oracle_response`` follows, else the
goal. In the ``local`` view a sub-goal the player cannot see now is said to be out of sight (the oracle
knows the whole level, as FogMaze's does).
"""

from __future__ import annotations

import numpy as np

from vlm_envs.envs.keys_doors.world import (
    ACTION_NAMES,
    COLOURS,
    LAVA,
    OPEN,
    PICKUP,
    Cell,
    Level,
    State,
    act,
    bits,
    carried,
    neighbour,
    openable,
)
from vlm_envs.envs.phrasing import counted, series


def explain(level: Level, state: State, way: list[int], per_turn: int, sight: np.ndarray | None) -> str:
    """The rationale for the first ``per_turn`` actions of the shortest ``way`` from ``state``; ``sight``:
    the cells the player sees (``local`` view), else None (it sees the whole level)."""
    keys = carried(level, state.held)
    text = f"I carry the {series(keys)} key{'s' if len(keys) > 1 else ''}. " if keys else "I carry no key. "
    lava = [ACTION_NAMES[d] for d in range(4) if _code(level, neighbour(state.cell, d)) == LAVA]
    if lava:
        text += f"Lava is next to me: {series(lava)}. "
    goal, target = _sub_goal(level, state, way)
    text += f"Next sub-goal: {goal}, {_where(state.cell, target, sight)}. "
    names = ", ".join(ACTION_NAMES[a] for a in way[:per_turn])
    return text + f"A shortest way takes {counted(len(way), 'action')}; next: {names}."


def _code(level: Level, cell: Cell) -> int:
    return level.cells[cell[0]][cell[1]]


def _sub_goal(level: Level, state: State, way: list[int]) -> tuple[str, Cell]:
    """What the first ``Pickup`` or ``Open`` of ``way`` does (else reaching the goal), and where."""
    here = state
    for action in way:
        if action == PICKUP:
            key = level.keys[level.key_at[here.cell]]
            return f"pick up the {COLOURS[key.colour]} key", key.cell
        if action == OPEN:
            doors = bits(openable(level, here))
            colours = series(COLOURS[level.doors[d].colour] for d in doors)
            return f"open the {colours} door{'s' if len(doors) > 1 else ''}", level.doors[doors[0]].cell
        here, _ = act(level, here, action)
    return "reach the goal", level.goal


def _where(me: Cell, target: Cell, sight: np.ndarray | None) -> str:
    """Where ``target`` lies from the player: ``2 cells up and 1 cell right of me``, ``here under me``,
    ``out of sight``."""
    if sight is not None and not sight[target]:
        return "out of sight"
    rows, cols = target[0] - me[0], target[1] - me[1]
    parts = [counted(abs(rows), "cell") + (" up" if rows < 0 else " down")] if rows else []
    parts += [counted(abs(cols), "cell") + (" left" if cols < 0 else " right")] if cols else []
    return " and ".join(parts) + " of me" if parts else "here under me"
