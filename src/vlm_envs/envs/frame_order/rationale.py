"""FrameOrder's oracle rationale: which frame comes first, and how the true order moves the objects least
of all the orders that start with it (the measure of :mod:`vlm_envs.envs.frame_order.order`)."""

from __future__ import annotations

from collections.abc import Sequence


def explain(order: Sequence[str], true_motion: int, gap: int) -> str:
    """Why ``order`` (letters in time order) is the answer: it moves the objects ``true_motion`` units, and
    every other order from the same first frame at least ``gap`` more."""
    first = order[0]
    return (
        f"Frame {first} is the first. Of the orders that start with {first}, {', '.join(order)} moves the "
        f"objects least: {true_motion} units in all (across plus up-down, summed over the objects), and any "
        f"other order at least {true_motion + gap}."
    )
