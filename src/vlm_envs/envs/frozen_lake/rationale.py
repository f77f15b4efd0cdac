"""FrozenLake's oracle rationale: where the goal is from the player, which neighbours are holes, and the
moves of a safe shortest path the oracle makes now (on slippery ice, the presses that make them)."""

from __future__ import annotations

from vlm_envs.envs.frozen_lake.actions import ACTION_NAMES
from vlm_envs.envs.frozen_lake.lake import STEPS, Cell, Lake
from vlm_envs.envs.phrasing import counted, series


def explain(lake: Lake, cell: Cell, path: list[int], moves: list[int], presses: list[int] | None) -> str:
    """The rationale for pressing ``presses`` (None: not slippery, the moves themselves) to make ``moves``,
    the start of the safe shortest ``path`` from ``cell``."""
    rows, cols = lake.goal[0] - cell[0], lake.goal[1] - cell[1]
    where = [counted(abs(rows), "tile") + (" down" if rows > 0 else " up")] if rows else []
    where += [counted(abs(cols), "tile") + (" right" if cols > 0 else " left")] if cols else []
    holes = [
        ACTION_NAMES[d]
        for d, (dr, dc) in enumerate(STEPS)
        if 0 <= cell[0] + dr < lake.size
        and 0 <= cell[1] + dc < lake.size
        and lake.is_hole((cell[0] + dr, cell[1] + dc))
    ]
    text = f"The goal is {' and '.join(where)} of me. "
    text += f"Holes next to me: {series(holes)}. " if holes else "No hole is next to me. "
    names = ", ".join(ACTION_NAMES[d] for d in moves)
    text += f"A safe shortest path takes {counted(len(path), 'move')}; next: {names}."
    if presses is not None:
        pressed = ", ".join(ACTION_NAMES[a] for a in presses)
        text += f" I know how the ice slides next, so to go {names} I press {pressed}."
    return text
