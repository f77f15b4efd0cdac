"""PolyominoPacking levels: a region carved into pieces, so every level can be packed.

A level is drawn as a partition: a rectangle cut into pieces grown one by one from its first free cell
(reading order), or an irregular region grown piece by piece, each new piece starting next to the ones
before. Each piece is then shown turned (and, where mirroring is allowed, flipped) at random, and the
letters are dealt in a random order. Every packing of the region with the pieces is then enumerated
(:func:`~vlm_envs.envs.polyomino_packing.solver.pack`); a level whose search runs past its budget is
drawn again, up to :data:`LEVEL_ATTEMPTS` draws, so its distances are exact. Past them the last draw is
played with its distances unknown (never at the presets: 0 of 1000 hard levels; only at the largest
knobs, such as 12 pieces of 6 cells in a rectangle).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from vlm_envs.envs.polyomino_packing.shapes import ROTATIONS, Cell, Shape, neighbours, normalized, oriented
from vlm_envs.envs.polyomino_packing.solver import Packings, pack

#: Draws of a partition before a level is given up on (each a few milliseconds).
PARTITION_TRIES = 200
#: Levels drawn for one whose packings the search enumerates within :data:`MAX_NODES`; past them, the last
#: is played without (its distances unknown).
LEVEL_ATTEMPTS = 6
#: Sub-problems the enumeration of one level may search.
MAX_NODES = 1500


@dataclasses.dataclass(frozen=True)
class Level:
    rows: int
    cols: int
    #: The region's cells, (row, column) from 0 at the top left, in reading order.
    region: tuple[Cell, ...]
    #: Each piece's shape as drawn beside the board (piece 0 is A).
    pieces: tuple[Shape, ...]
    #: Each piece's cells in the generator's own packing.
    solution: tuple[tuple[Cell, ...], ...]
    #: Every packing (``None``: past the search budget at every draw).
    packings: Packings | None
    #: Levels drawn before this one (search past its budget).
    attempt: int


def _grow(start: Cell, size: int, free: set[Cell], rng: np.random.Generator) -> list[Cell] | None:
    """A piece of ``size`` cells from ``start`` through ``free`` cells, each next cell a random free
    neighbour of the piece so far; ``None`` where it cannot grow that far."""
    piece = [start]
    while len(piece) < size:
        frontier = sorted({n for cell in piece for n in neighbours(cell) if n in free and n not in piece})
        if not frontier:
            return None
        piece.append(frontier[int(rng.integers(len(frontier)))])
    return piece


def _sizes(pieces: int, total: int, low: int, high: int, rng: np.random.Generator) -> list[int]:
    """``pieces`` sizes in ``low..high`` that add up to ``total`` (within their range)."""
    sizes = [low] * pieces
    for _ in range(total - low * pieces):
        open_ = [i for i, s in enumerate(sizes) if s < high]
        sizes[open_[int(rng.integers(len(open_)))]] += 1
    return sizes


def rectangle_sides(pieces: int, low: int, high: int) -> list[tuple[int, int]]:
    """The rectangles (rows, columns) that ``pieces`` pieces of ``low..high`` cells can fill: at most
    twice as wide as high, else the squarest there are."""
    sides = [
        (r, c)
        for r in range(1, high * pieces + 1)
        for c in range(r, high * pieces + 1)
        if low * pieces <= r * c <= high * pieces
    ]
    fit = [(r, c) for r, c in sides if c <= 2 * r]
    return fit or [min(sides, key=lambda s: (s[1] / s[0], s))]


def _rectangle(pieces: int, low: int, high: int, rng: np.random.Generator) -> list[list[Cell]] | None:
    """A rectangle cut into ``pieces`` pieces of ``low..high`` cells, each grown from the first free cell."""
    options = rectangle_sides(pieces, low, high)
    rows, cols = options[int(rng.integers(len(options)))]
    sizes = _sizes(pieces, rows * cols, low, high, rng)
    free = {(r, c) for r in range(rows) for c in range(cols)}
    out = []
    for size in sizes:
        piece = _grow(min(free), size, free, rng)
        if piece is None:
            return None
        free -= set(piece)
        out.append(piece)
    return out


def _irregular(pieces: int, low: int, high: int, rng: np.random.Generator) -> list[list[Cell]] | None:
    """An irregular region grown piece by piece in a square about 1.5 times its area, each piece starting
    next to the ones before."""
    sizes = [int(rng.integers(low, high + 1)) for _ in range(pieces)]
    side = math.ceil(math.sqrt(1.5 * sum(sizes)))
    free = {(r, c) for r in range(side) for c in range(side)}
    out: list[list[Cell]] = []
    for size in sizes:
        if out:
            edge = sorted({n for piece in out for cell in piece for n in neighbours(cell) if n in free})
            if not edge:
                return None
            start = edge[int(rng.integers(len(edge)))]
        else:
            start = (side // 2, side // 2)
        piece = _grow(start, size, free, rng)
        if piece is None:
            return None
        free -= set(piece)
        out.append(piece)
    return out


def _partition(shape: str, pieces: int, low: int, high: int, rng: np.random.Generator) -> list[list[Cell]]:
    """A partition drawn again until one is found, within :data:`PARTITION_TRIES` draws; else (never seen)
    straight pieces of ``high`` cells side by side."""
    draw = _rectangle if shape == "rectangle" else _irregular
    for _ in range(PARTITION_TRIES):
        found = draw(pieces, low, high, rng)
        if found is not None:
            return found
    return [[(r, c) for r in range(high)] for c in range(pieces)]


def _draw(
    shape: str, pieces: int, low: int, high: int, mirror: bool, rng: np.random.Generator
) -> tuple[tuple[Cell, ...], tuple[Shape, ...], tuple[tuple[Cell, ...], ...]]:
    """A region, its pieces as drawn and the partition they came from (the region's top left at (0, 0),
    letters dealt in a random order)."""
    parts = _partition(shape, pieces, low, high, rng)
    top = min(r for part in parts for r, _ in part)
    left = min(c for part in parts for _, c in part)
    solution = tuple(tuple(sorted((r - top, c - left) for r, c in parts[i])) for i in rng.permutation(pieces))
    drawn = tuple(
        oriented(normalized(cells), ROTATIONS[int(rng.integers(4))], mirror and bool(rng.integers(2)))
        for cells in solution
    )
    return tuple(sorted(cell for cells in solution for cell in cells)), drawn, solution


def generate(shape: str, pieces: int, low: int, high: int, mirror: bool, rng: np.random.Generator) -> Level:
    """A level of ``pieces`` pieces of ``low..high`` cells filling a ``shape`` region (``rectangle`` or
    ``irregular``), pieces shown turned (and mirrored, where ``mirror``) at random: the first of
    :data:`LEVEL_ATTEMPTS` draws whose packings the search enumerates, else the last draw."""
    attempt = 0
    while True:
        region, drawn, solution = _draw(shape, pieces, low, high, mirror, rng)
        packings = pack(region, drawn, mirror, MAX_NODES)
        if packings is not None or attempt == LEVEL_ATTEMPTS - 1:
            rows = max(r for r, _ in region) + 1
            cols = max(c for _, c in region) + 1
            return Level(rows, cols, region, drawn, solution, packings, attempt)
        attempt += 1
