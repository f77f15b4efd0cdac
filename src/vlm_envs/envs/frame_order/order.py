"""Orders of frames and how far they make the objects move: the measure that makes the true order the
only plausible one.

The motion between two frames is the sum over objects of how far each moved, across plus up-down (the
L1 distance between its centres: integers, exact in any process). An order's motion is the sum over its
consecutive frames. Objects move smoothly, so the true order moves them least; an animation is shown only
where every other order that starts at the first frame moves them at least ``min_gap`` units more.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from vlm_envs.envs.frame_order.motion import Vec

#: The letters frames are labelled with, in the order the observation lists them.
LETTERS = string.ascii_uppercase


def motion_matrix(frames: Sequence[Sequence[Vec]]) -> np.ndarray:
    """``m[s, t]``: how far the objects move in all from frame ``s`` to frame ``t`` (summed L1)."""
    pos = np.asarray(frames, dtype=np.int64)  # (frames, objects, 2)
    return np.abs(pos[:, None] - pos[None, :]).sum(axis=(2, 3))


def order_motion(matrix: np.ndarray, order: Sequence[int]) -> int:
    """How far ``order`` (frame indices) makes the objects move in all."""
    return int(sum(matrix[a, b] for a, b in itertools.pairwise(order)))


@lru_cache(maxsize=16)
def _orders(frames: int) -> np.ndarray:
    """Every order of ``frames`` frames that starts at frame 0, one per row, the true one (0, 1, ...)
    first."""
    rest = np.array(list(itertools.permutations(range(1, frames))), dtype=np.int64).reshape(-1, frames - 1)
    return np.concatenate([np.zeros((len(rest), 1), dtype=np.int64), rest], axis=1)


def order_gap(matrix: np.ndarray) -> int:
    """How much more the least-moving order other than the true one makes the objects move than the true
    one (frames in time order, the first one fixed); positive where the true order is the only least one."""
    orders = _orders(len(matrix))
    if len(orders) == 1:
        return int(np.iinfo(np.int64).max)
    motion = matrix[orders[:, :-1], orders[:, 1:]].sum(axis=1)
    return int(motion[1:].min() - motion[0])
