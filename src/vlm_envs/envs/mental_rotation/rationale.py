"""MentalRotation's oracle rationale: the quarter turns that take one view to the other, or the mirror.

Turns are about the fixed axes drawn in each view (``x+`` ... ``z-``), found by the same breadth-first
search the oracle plays; in ``mirror`` mode the claim is checked on the cubes: which turns, after the
mirror image (``x`` negated) or without it, make the left shape look exactly like the right one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image

from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, key, mirrored, oriented, shortest_turns


def explain_turns(cubes: int, turns: list[str], now: int) -> str:
    """Why the first ``now`` of ``turns`` (a shortest way from the current view to the target) come next."""
    text = f"Both views show the same shape of {cubes} cubes, turned differently."
    named = f"quarter turn{'s' if len(turns) > 1 else ''} {' '.join(turns)}"
    if now >= len(turns):
        return (
            f"{text} The {named} take{'' if len(turns) > 1 else 's'} the current view to the target exactly."
        )
    first = "the first" if now == 1 else f"the first {now}"
    return f"{text} A shortest way to the target is the {named}; I play {first} now."


def explain_mirror(
    cubes: np.ndarray, left: Image.Image, right: int, answer: str | None, view: Callable[[int], Image.Image]
) -> str:
    """Why ``answer`` (``same`` or ``mirror``) is right: ``left`` is the view of ``cubes`` that ``view``
    draws in some orientation, the right view shows them (or their mirror image) in orientation ``right``."""
    first = next(r for r in range(len(ROTATIONS)) if view(r).tobytes() == left.tobytes())
    if answer == "same":
        turns = _turns(cubes, key(oriented(cubes, first)), right)
        if not turns:
            return "The two views show the shape in the same orientation, so it is the same shape."
        return (
            f"Turning the left shape by {' '.join(turns)} (quarter turns about the fixed axes) gives exactly "
            "the right view, so the right one is the same shape, only rotated."
        )
    shape = mirrored(cubes)
    turns = _turns(shape, key(mirrored(oriented(cubes, first))), right)
    how = f"turned by {' '.join(turns)}" if turns else "as it stands"
    return (
        "No quarter turns make the left shape look like the right one, but its mirror image "
        f"(x flipped to -x), {how}, matches the right view exactly, so the right one is the mirror image."
    )


def _turns(cubes: np.ndarray, start: tuple, goal: int) -> list[str]:
    """A shortest turn sequence from the orientation of ``cubes`` keyed ``start`` to their look in
    orientation ``goal``."""
    keys = [key(oriented(cubes, r)) for r in range(len(ROTATIONS))]
    goals = {r for r, k in enumerate(keys) if k == keys[goal]}
    return shortest_turns(goals, keys.index(start))
