"""The one check a reward passes before any trainer or summary sees it.

A reward an env (or a user's reward function) hands back is hostile input like any other: ``inf``,
NaN, ``None``, text, or a finite number so large that a group's statistics overflow (a reward of
``1e308`` made every parameter non-finite after one GRPO step, and nothing raised). Such a reward
ends its episode FAILED with the reason, and the trainers leave FAILED episodes out of the advantage.

A reward is accepted when it is a real number (``int``, ``float``, ``bool``, numpy's scalars), finite,
and at most :data:`MAX_ABS_REWARD` in magnitude. Torch-free: the eval loop uses it too.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

#: Largest accepted reward magnitude. Trainers hold rewards in float32 (max 3.4e38) and square them for
#: a group's std (so about 1.8e19 overflows), then sum groups of them: 1e6 leaves wide room for any
#: real reward scale and keeps every statistic finite.
MAX_ABS_REWARD = 1e6


class RewardError(ValueError):
    """A reward is not a finite number within :data:`MAX_ABS_REWARD` (or computing it raised)."""


def check_reward(value: Any, what: str) -> float:
    """``value`` as a float if it is an acceptable reward; :class:`RewardError` naming ``what``
    (e.g. ``"the episode reward"``) and the value otherwise."""
    if not isinstance(value, numbers.Real):
        raise RewardError(f"{what} is {_show(value)}, not a number")
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        raise RewardError(f"{what} is an int beyond any float, beyond the accepted magnitude") from None
    if not math.isfinite(number):
        raise RewardError(f"{what} is {number}, not a finite number")
    if abs(number) > MAX_ABS_REWARD:
        raise RewardError(f"{what} is {number:g}, beyond the accepted magnitude {MAX_ABS_REWARD:g}")
    return number


def call_reward(fn: Callable[[], Any], what: str) -> float:
    """``fn()`` checked as a reward; a raising ``fn`` is a :class:`RewardError` too."""
    try:
        value = fn()
    except Exception as err:  # a reward function may fail in any way; the episode says how
        raise RewardError(f"{what} raised {type(err).__name__}: {str(err)[:300]}") from err
    return check_reward(value, what)


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.60}" if value is not None else "None"
