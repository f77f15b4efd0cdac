"""Lights Out's oracle rationale: which lights are on, the fewest presses that turn them all off, and
the ones pressed now."""

from __future__ import annotations

from vlm_envs.envs.lights_out.actions import cell_name
from vlm_envs.envs.lights_out.board import cells_of
from vlm_envs.envs.phrasing import counted, series


def explain(n: int, lights: int, solution: int, now: list[int]) -> str:
    """The rationale for pressing ``now``, the first presses of the fewest-presses ``solution``."""
    on = [cell_name(n, cell) for cell in cells_of(lights)]
    plan = [cell_name(n, cell) for cell in cells_of(solution)]
    lit = f"{counted(len(on), 'light')} {'is' if len(on) == 1 else 'are'} on: {series(on)}."
    fewest = f"The fewest presses that turn them all off: {len(plan)} ({', '.join(plan)})"
    if len(now) == len(plan):
        return f"{lit} {fewest}; I press them all now."
    return f"{lit} {fewest}; I press {', '.join(cell_name(n, cell) for cell in now)} now."
