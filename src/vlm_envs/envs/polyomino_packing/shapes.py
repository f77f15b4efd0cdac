"""Polyomino geometry: a shape is a sorted tuple of (row, column) cells shifted to touch row 0 and column
0; pieces turn clockwise in quarter turns and mirror left to right (mirror first, then turn).

A shape as drawn is ``rows`` of ``#`` and ``.``: its smallest bounding box, row 0 at the top.
"""

from __future__ import annotations

from collections.abc import Iterable

Cell = tuple[int, int]
Shape = tuple[Cell, ...]
#: The turns a reply may name, in degrees clockwise.
ROTATIONS = (0, 90, 180, 270)


def normalized(cells: Iterable[Cell]) -> Shape:
    """``cells`` shifted so that the smallest row and column are 0, sorted."""
    cells = list(cells)
    top = min(r for r, _ in cells)
    left = min(c for _, c in cells)
    return tuple(sorted((r - top, c - left) for r, c in cells))


def turned(shape: Shape, degrees: int) -> Shape:
    """``shape`` turned ``degrees`` (a multiple of 90) clockwise."""
    cells = list(shape)
    for _ in range(degrees // 90 % 4):
        cells = [(c, -r) for r, c in cells]
    return normalized(cells)


def mirrored(shape: Shape) -> Shape:
    """``shape`` flipped left to right."""
    return normalized((r, -c) for r, c in shape)


def oriented(shape: Shape, degrees: int, mirror: bool) -> Shape:
    """``shape`` mirrored left to right where ``mirror``, then turned ``degrees`` clockwise."""
    return turned(mirrored(shape) if mirror else shape, degrees)


def orientations(shape: Shape, mirror: bool) -> dict[Shape, tuple[int, bool]]:
    """Every distinct orientation of ``shape`` (its mirror images too where ``mirror``) and the first
    (degrees, mirror) that gives it: no mirror before mirror, fewer degrees first."""
    out: dict[Shape, tuple[int, bool]] = {}
    for flip in (False, True) if mirror else (False,):
        for degrees in ROTATIONS:
            out.setdefault(oriented(shape, degrees, flip), (degrees, flip))
    return out


def canonical(shape: Shape, mirror: bool) -> Shape:
    """One shape for all of ``shape``'s orientations: two pieces are interchangeable exactly when their
    canonical shapes are equal."""
    return min(orientations(shape, mirror))


def size_of(shape: Shape) -> tuple[int, int]:
    """Rows and columns of the shape's bounding box."""
    return max(r for r, _ in shape) + 1, max(c for _, c in shape) + 1


def rows_of(shape: Shape, mark: str = "#") -> list[str]:
    """The shape drawn as rows of ``mark`` (a cell of it) and ``.`` (a cell of its box that is not)."""
    height, width = size_of(shape)
    cells = set(shape)
    return ["".join(mark if (r, c) in cells else "." for c in range(width)) for r in range(height)]


def neighbours(cell: Cell) -> tuple[Cell, ...]:
    """The four cells sharing a side with ``cell``: up, down, left, right."""
    r, c = cell
    return ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
