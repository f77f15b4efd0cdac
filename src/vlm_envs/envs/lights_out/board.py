"""Lights Out's rules: an n x n board of lights, presses that toggle a light and its four neighbours,
scrambles drawn from a seed, and the fewest presses that turn every light off (linear algebra over GF(2)).

A board is an int bitmask of the lights that are on: bit ``r * n + c`` is the light in row ``r``, column
``c``. A set of presses is a bitmask too. Pressing a light twice undoes it and the order of presses does
not matter, so a solution is a set of lights to press once.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

#: Draws of a scramble before falling back to one press (a scramble of a null-space set leaves it dark).
MAX_DRAWS = 100


@lru_cache(maxsize=16)
def toggles(n: int) -> tuple[int, ...]:
    """For each light, the mask of the lights pressing it toggles (itself and its orthogonal neighbours)."""
    masks = []
    for r in range(n):
        for c in range(n):
            mask = 0
            for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
                if 0 <= r + dr < n and 0 <= c + dc < n:
                    mask |= 1 << ((r + dr) * n + c + dc)
            masks.append(mask)
    return tuple(masks)


def press(n: int, lights: int, cell: int) -> int:
    """The board after pressing ``cell``."""
    return lights ^ toggles(n)[cell]


def cells_of(mask: int) -> list[int]:
    """The cells of a mask, in row-major order."""
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def fewest_presses(n: int, lights: int) -> int:
    """The smallest set of presses that turns every light off (ties: the first found in a fixed order of
    the null space); a ``ValueError`` when no set does (a board no scramble makes)."""
    size = n * n
    rows = [toggles(n)[i] | (lights >> i & 1) << size for i in range(size)]  # the toggle matrix is symmetric
    pivots: list[int] = []
    for col in range(size):
        at = next((i for i in range(len(pivots), size) if rows[i] >> col & 1), None)
        if at is None:
            continue
        top = len(pivots)
        rows[top], rows[at] = rows[at], rows[top]
        for i in range(size):
            if i != top and rows[i] >> col & 1:
                rows[i] ^= rows[top]
        pivots.append(col)
    if any(rows[i] >> size & 1 for i in range(len(pivots), size)):
        raise ValueError("no set of presses turns these lights off")
    base = sum(1 << col for i, col in enumerate(pivots) if rows[i] >> size & 1)
    pivoted = set(pivots)
    free = [col for col in range(size) if col not in pivoted]
    basis = [(1 << f) | sum(1 << col for i, col in enumerate(pivots) if rows[i] >> f & 1) for f in free]
    best = base
    for pick in range(1, 1 << len(basis)):
        candidate = base
        for j, vector in enumerate(basis):
            if pick >> j & 1:
                candidate ^= vector
        if candidate.bit_count() < best.bit_count():
            best = candidate
    return best


def scramble(n: int, presses: int, seed: int) -> int:
    """The lights after ``presses`` distinct random presses on a dark board (so always solvable), never
    dark itself."""
    rng = np.random.default_rng([seed, 0x11647])
    for _ in range(MAX_DRAWS):
        lights = 0
        for cell in rng.choice(n * n, size=presses, replace=False):
            lights = press(n, lights, int(cell))
        if lights:
            return lights
    return toggles(n)[int(rng.integers(n * n))]
