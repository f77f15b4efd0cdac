"""Rush Hour's rules: vehicles of length 2 or 3 on an n x n grid, each sliding along its own axis only.

A position is a tuple with one number per vehicle: the column of a horizontal vehicle's left end, or the
row of a vertical vehicle's top end. Vehicle 0 is the red car ``X``, horizontal in the exit row
(:func:`exit_row`); it is out when its right end reaches the last column. A move slides one vehicle one or
more cells through free cells; every move counts one, however far it slides.
"""

from __future__ import annotations

import dataclasses
import functools
import string

Position = tuple[int, ...]
#: Bits per vehicle in a packed position (boards of at most 8 cells a side).
BITS, MASK = 3, 7
#: Vehicle names: the red car is X, the others A, B, C, ... (X skipped).
NAMES = "X" + string.ascii_uppercase.replace("X", "")
DIRECTIONS = ("up", "down", "left", "right")


@dataclasses.dataclass(frozen=True)
class Vehicle:
    horizontal: bool
    #: The row of a horizontal vehicle, the column of a vertical one.
    line: int
    length: int


@dataclasses.dataclass(frozen=True)
class Layout:
    """The board size and the vehicles (what never changes during an episode).

    Searches pack a position into one int, :data:`BITS` bits per vehicle (:meth:`pack`), and read each
    vehicle's cells as bit masks over the row-major cells.
    """

    n: int
    vehicles: tuple[Vehicle, ...]

    def cells(self, v: int, at: int) -> list[tuple[int, int]]:
        """The (row, column) cells vehicle ``v`` covers when its end is at ``at``."""
        car = self.vehicles[v]
        if car.horizontal:
            return [(car.line, at + i) for i in range(car.length)]
        return [(at + i, car.line) for i in range(car.length)]

    @functools.cached_property
    def _masks(self) -> tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]:
        """Per vehicle and end position: its cells, its first cell and its last cell as bit masks."""
        out = []
        for v, car in enumerate(self.vehicles):
            spans = range(self.n - car.length + 1)
            bits = [[1 << (r * self.n + c) for r, c in self.cells(v, at)] for at in spans]
            out.append((tuple(sum(b) for b in bits), tuple(b[0] for b in bits), tuple(b[-1] for b in bits)))
        return tuple(out)

    def pack(self, position: Position) -> int:
        return sum(at << (BITS * v) for v, at in enumerate(position))

    def unpack(self, state: int) -> Position:
        return tuple((state >> (BITS * v)) & MASK for v in range(len(self.vehicles)))

    @functools.cached_property
    def _tables(self) -> tuple[tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]:
        """Per vehicle: its shift in a packed position, its unit there, and :attr:`_masks`."""
        return tuple((BITS * v, 1 << (BITS * v), *m) for v, m in enumerate(self._masks))

    def neighbours(self, state: int) -> list[int]:
        """Every packed position one move from packed ``state``."""
        tables = self._tables
        occupied = 0
        for shift, _, cover, _, _ in tables:
            occupied |= cover[(state >> shift) & MASK]
        out = []
        for shift, unit, cover, first, last in tables:
            at = (state >> shift) & MASK
            to = at - 1
            while to >= 0 and not occupied & first[to]:
                out.append(state - (at - to) * unit)
                to -= 1
            to, end = at + 1, len(cover)
            while to < end and not occupied & last[to]:
                out.append(state + (to - at) * unit)
                to += 1
        return out

    def solved(self, position: Position) -> bool:
        return position[0] == self.n - self.vehicles[0].length


def exit_row(n: int) -> int:
    """The row of the red car and the exit, counted from 0 at the top."""
    return (n - 1) // 2


def move_between(before: Position, after: Position, layout: Layout) -> tuple[int, str, int]:
    """The move from ``before`` to ``after`` (one move apart): vehicle, direction, cells."""
    v = next(i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b)
    forward = after[v] > before[v]
    direction = (
        ("right" if forward else "left") if layout.vehicles[v].horizontal else ("down" if forward else "up")
    )
    return v, direction, abs(after[v] - before[v])


def apply_move(layout: Layout, position: Position, v: int, direction: str, cells: int) -> Position | None:
    """``position`` after vehicle ``v`` slides ``cells`` cells ``direction``, or None if it cannot."""
    if v >= len(position) or cells < 1:
        return None
    horizontal = layout.vehicles[v].horizontal
    if (direction in ("left", "right")) != horizontal:
        return None
    after = (
        *position[:v],
        position[v] + (cells if direction in ("right", "down") else -cells),
        *position[v + 1 :],
    )
    if not 0 <= after[v] <= layout.n - layout.vehicles[v].length:
        return None
    reachable = {layout.unpack(s) for s in layout.neighbours(layout.pack(position))}
    return after if after in reachable else None


def grid(layout: Layout, position: Position) -> list[list[str]]:
    """The board as rows of vehicle names, ``.`` for an empty cell."""
    rows = [["."] * layout.n for _ in range(layout.n)]
    for v, at in enumerate(position):
        for r, c in layout.cells(v, at):
            rows[r][c] = NAMES[v]
    return rows
