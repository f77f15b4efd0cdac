"""FogMaze's oracle: it knows the whole map and walks a shortest path (BFS over the view's actions)."""

from __future__ import annotations

from collections import deque

import numpy as np

from vlm_envs.envs.fog_maze.maze import Cell, apply_action


def shortest_actions(walls: np.ndarray, cell: Cell, heading: int, goal: Cell, view: str) -> list[int]:
    """A shortest action sequence from (``cell``, ``heading``) into ``goal`` (turns count as actions
    in ``first_person``; the heading is ignored in ``local``). Ties go to the lower action index."""
    n_actions = 3 if view == "first_person" else 4
    start = (cell, heading if view == "first_person" else 0)
    parent: dict[tuple[Cell, int], tuple[tuple[Cell, int], int] | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[0] == goal:
            path: list[int] = []
            link = parent[state]
            while link is not None:
                state, action = link
                path.append(action)
                link = parent[state]
            return path[::-1]
        for action in range(n_actions):
            nxt_cell, nxt_heading, blocked = apply_action(walls, state[0], state[1], action, view)
            nxt = (nxt_cell, nxt_heading)
            if not blocked and nxt not in parent:
                parent[nxt] = (state, action)
                queue.append(nxt)
    raise ValueError(f"the goal {goal} cannot be reached from {cell}")
