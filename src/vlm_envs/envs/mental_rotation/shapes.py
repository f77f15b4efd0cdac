"""MentalRotation's geometry: polycubes drawn from a seed, the 24 rotations and the quarter turns.

An orientation is an index into :data:`ROTATIONS`; a quarter turn about a fixed world axis maps
orientation ``R`` to ``TURNS[name] @ R``. A shape in an orientation is keyed by its cube set moved
to the origin, so equal keys always look the same.
"""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np

Key = tuple[tuple[int, int, int], ...]


def _all_rotations() -> tuple[np.ndarray, ...]:
    """The 24 proper rotations of the cube: signed permutation matrices with determinant +1."""
    out = []
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1, -1), repeat=3):
            m = np.zeros((3, 3), dtype=np.int64)
            for row, (col, sign) in enumerate(zip(perm, signs, strict=True)):
                m[row, col] = sign
            if round(np.linalg.det(m)) == 1:
                out.append(m)
    return tuple(out)


ROTATIONS = _all_rotations()
_INDEX = {m.tobytes(): i for i, m in enumerate(ROTATIONS)}
#: Quarter turns (+90 degrees, right-handed) about the fixed world axes, and their inverses.
_PLUS = {
    "x": np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]]),
    "y": np.array([[0, 0, 1], [0, 1, 0], [-1, 0, 0]]),
    "z": np.array([[0, -1, 0], [1, 0, 0], [0, 0, 1]]),
}
TURN_NAMES = ("x+", "x-", "y+", "y-", "z+", "z-")
TURNS = {f"{a}{s}": (m if s == "+" else m.T) for a, m in _PLUS.items() for s in "+-"}
_NEIGHBOURS = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]])


def turn(orientation: int, name: str) -> int:
    """The orientation after a quarter turn ``name`` (``x+`` ... ``z-``) about the world axis."""
    return _INDEX[(TURNS[name] @ ROTATIONS[orientation]).astype(np.int64).tobytes()]


def random_polycube(cubes: int, rng: np.random.Generator) -> np.ndarray:
    """A connected set of ``cubes`` unit cubes (face to face), grown one cube at a time."""
    cells = [(0, 0, 0)]
    taken = {cells[0]}
    while len(cells) < cubes:
        base = np.array(cells[int(rng.integers(len(cells)))])
        cand = tuple(int(v) for v in base + _NEIGHBOURS[int(rng.integers(6))])
        if cand not in taken:
            taken.add(cand)
            cells.append(cand)  # type: ignore[arg-type]
    return np.array(cells, dtype=np.int64)


def oriented(cubes: np.ndarray, orientation: int) -> np.ndarray:
    """The cubes rotated into ``orientation`` and moved so their minimum corner is the origin."""
    out = cubes @ ROTATIONS[orientation].T
    return out - out.min(axis=0)


def key(cubes: np.ndarray) -> Key:
    """An order-free, translation-free key of a cube set."""
    moved = cubes - cubes.min(axis=0)
    return tuple(sorted((int(a), int(b), int(c)) for a, b, c in moved))


def mirrored(cubes: np.ndarray) -> np.ndarray:
    """The mirror image (x negated)."""
    return cubes * np.array([-1, 1, 1])


def is_chiral(cubes: np.ndarray) -> bool:
    """Whether no rotation turns the shape into its mirror image."""
    target = key(mirrored(cubes))
    return all(key(oriented(cubes, r)) != target for r in range(len(ROTATIONS)))


def shortest_turns(goals: set[int], start: int) -> list[str]:
    """A shortest sequence of quarter turns from ``start`` into any of ``goals`` (BFS over the 24
    orientations; ties go to the earlier name in :data:`TURN_NAMES`)."""
    parent: dict[int, tuple[int, str] | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if node in goals:
            path: list[str] = []
            while (link := parent[node]) is not None:
                node, name = link
                path.append(name)
            return path[::-1]
        for name in TURN_NAMES:
            nxt = turn(node, name)
            if nxt not in parent:
                parent[nxt] = (node, name)
                queue.append(nxt)
    raise ValueError("no goal orientation given")
