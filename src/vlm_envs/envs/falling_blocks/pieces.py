"""The seven falling pieces (tetrominoes), their four rotations, and seeded piece sequences.

A piece's rotation 0 is drawn in :data:`SPAWN`; rotation ``r`` is that drawing turned ``r`` quarter turns
clockwise and trimmed to its cells. A :class:`Shape` holds one rotation as the drop needs it: its row masks
from the bottom up (bit ``x`` is the shape's column ``x`` from its leftmost cell) and, for each column, the
height of its lowest cell. Rotations that give the same cells (the O's four, the I's, S's and Z's two pairs)
land alike.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np

#: The pieces, in the order a sequence draws from.
PIECES = "IOTSZJL"
#: Each piece in rotation 0, top row first (``#`` a cell).
SPAWN: dict[str, tuple[str, ...]] = {
    "I": ("####",),
    "O": ("##", "##"),
    "T": (".#.", "###"),
    "S": (".##", "##."),
    "Z": ("##.", ".##"),
    "J": ("#..", "###"),
    "L": ("..#", "###"),
}
#: Rotations per piece: 0 to 3 quarter turns clockwise.
ROTATIONS = 4
#: The widest well a shape keeps its row masks shifted for.
MAX_COLUMNS = 16


@dataclasses.dataclass(frozen=True)
class Shape:
    """One rotation of a piece, as it drops."""

    piece: str
    rotation: int
    #: Top row first, ``#`` a cell (the picture the prompt and the text view show).
    picture: tuple[str, ...]
    #: Row masks from the bottom row up; bit ``x`` is the shape's column ``x``.
    rows: tuple[int, ...]
    #: For each column of the shape, the height of its lowest cell above the shape's bottom.
    bottoms: tuple[int, ...]
    #: ``rows`` shifted to each column of a well (``shifted[c]``: the leftmost cell at column ``c``).
    shifted: tuple[tuple[int, ...], ...]

    @property
    def width(self) -> int:
        return len(self.bottoms)

    @property
    def height(self) -> int:
        return len(self.rows)


def _turned(picture: tuple[str, ...]) -> tuple[str, ...]:
    """``picture`` turned a quarter turn clockwise."""
    return tuple("".join(column) for column in zip(*picture[::-1], strict=True))


@cache
def shape(piece: str, rotation: int) -> Shape:
    """``piece`` turned ``rotation`` quarter turns clockwise (a ``KeyError`` for an unknown piece)."""
    picture = SPAWN[piece]
    for _ in range(rotation % ROTATIONS):
        picture = _turned(picture)
    rows = tuple(sum(1 << x for x, ch in enumerate(line) if ch == "#") for line in reversed(picture))
    bottoms = tuple(next(y for y, row in enumerate(rows) if row >> x & 1) for x in range(len(picture[0])))
    shifted = tuple(tuple(row << column for row in rows) for column in range(MAX_COLUMNS))
    return Shape(piece, rotation % ROTATIONS, picture, rows, bottoms, shifted)


@cache
def distinct_rotations(piece: str) -> tuple[int, ...]:
    """The rotations of ``piece`` that differ in shape, each the lowest of those alike (O: 0; I, S, Z: 0, 1;
    T, J, L: 0 to 3)."""
    seen: list[tuple[str, ...]] = []
    out = []
    for rotation in range(ROTATIONS):
        picture = shape(piece, rotation).picture
        if picture not in seen:
            seen.append(picture)
            out.append(rotation)
    return tuple(out)


def bag_sequence(count: int, rng: np.random.Generator) -> str:
    """``count`` pieces drawn seven at a time as shuffled bags of all seven (every piece once a bag)."""
    out: list[str] = []
    while len(out) < count:
        out += [PIECES[int(i)] for i in rng.permutation(len(PIECES))]
    return "".join(out[:count])
