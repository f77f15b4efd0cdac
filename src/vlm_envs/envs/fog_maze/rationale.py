"""FogMaze's oracle rationale: what the view shows around the player and which way a shortest path goes.

Only what the current view shows is described (the walls of the player's cell, the goal when it is in
view, the corridor ahead); the way to go is the shortest path ``oracle_response`` follows.
"""

from __future__ import annotations

import numpy as np

from vlm_envs.envs.fog_maze.actions import ACTION_NAMES
from vlm_envs.envs.fog_maze.config import FogMazeConfig
from vlm_envs.envs.fog_maze.maze import Cell, Maze, can_move, neighbour
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.envs.phrasing import counted, series

#: Compass names of the directions of ``maze.DIRECTIONS`` (as the first-person footer names them).
COMPASS = ("north", "east", "south", "west")


def explain(maze: Maze, cell: Cell, heading: int, config: FogMazeConfig) -> str:
    """What the player at ``cell`` facing ``heading`` sees, and the shortest path's next actions (as
    many as one turn takes)."""
    view, walls, goal = config.view, maze.walls, maze.goal
    if view == "first_person":
        sight = _ahead(walls, cell, heading, goal)
    else:
        sight = _around(walls, cell, goal, config.view_size // 2)
    path = shortest_actions(walls, cell, heading, goal, view)
    now = config.max_actions_per_turn
    names = ", ".join(ACTION_NAMES[view][a] for a in path[:now])
    return f"{sight} A shortest path to the goal {'is' if now >= len(path) else 'starts'} {names}."


def _around(walls: np.ndarray, cell: Cell, goal: Cell, k: int) -> str:
    """The walls of the player's cell and where the goal is, if the ``k``-window shows it."""
    names = ACTION_NAMES["local"]
    opened = [names[d] for d in range(4) if can_move(walls, cell, d)]
    closed = [names[d] for d in range(4) if not can_move(walls, cell, d)]
    text = f"From my cell the way is open {series(opened)}"
    text += f"; {series(closed)} {'is a wall' if len(closed) == 1 else 'are walls'}." if closed else "."
    rows, cols = goal[0] - cell[0], goal[1] - cell[1]
    if max(abs(rows), abs(cols)) > k:
        return f"{text} The goal is not in view."
    parts = [counted(abs(rows), "cell") + (" up" if rows < 0 else " down")] if rows else []
    parts += [counted(abs(cols), "cell") + (" left" if cols < 0 else " right")] if cols else []
    return f"{text} The goal is in view, {' and '.join(parts)} of me."


def _ahead(walls: np.ndarray, cell: Cell, heading: int, goal: Cell) -> str:
    """The corridor straight ahead: how far it runs, and the goal if it stands in it."""
    run, at = 0, cell
    while can_move(walls, at, heading) and at != goal:
        at = neighbour(at, heading)
        run += 1
    text = f"I face {COMPASS[heading]}"
    if at == goal and run:
        return f"{text}; the goal is straight ahead, {counted(run, 'cell')} away."
    if not run:
        return f"{text} with a wall right in front of me."
    return f"{text}; the corridor ahead runs {counted(run, 'cell')} to a wall."
