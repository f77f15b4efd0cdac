"""Connect Four's rules on bitboards: stones dropped into the columns of a ``rows`` x ``cols`` board, four
in a row (across, up or diagonal) wins, a full board is a draw.

A player's stones and ``mask`` (every stone) are ints. Column ``c`` holds bits ``c * (rows + 1)`` (its bottom
cell) to ``c * (rows + 1) + rows - 1``; the bit above each column stays empty, so shifts by 1 (up),
``rows + 1`` (across), ``rows`` and ``rows + 2`` (the two diagonals) never carry a line from one column's top
into the next column's bottom (the layout of Pascal Pons' Connect Four solver).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, eq=False)
class Geometry:
    """The masks of a ``rows`` x ``cols`` board (:func:`geometry` makes one per size)."""

    rows: int
    cols: int
    #: Bits per column: its cells and the empty bit above them.
    stride: int
    #: Each column's cells.
    column_masks: tuple[int, ...]
    #: Every cell of the board.
    full: int
    #: The bottom cell of every column.
    bottoms: int
    #: The cells of the middle column (the two middle ones on an even board).
    centre: int
    #: The columns from the middle outwards, the left one first on a tie.
    centre_order: tuple[int, ...]
    #: The bit distance between neighbours in a line: up, one diagonal, across, the other diagonal.
    shifts: tuple[int, int, int, int]


@lru_cache(maxsize=64)
def geometry(rows: int, cols: int) -> Geometry:
    """The board of ``rows`` x ``cols`` cells (one shared object per size)."""
    stride = rows + 1
    columns = tuple(((1 << rows) - 1) << (c * stride) for c in range(cols))
    middle = [cols // 2] if cols % 2 else [cols // 2 - 1, cols // 2]
    return Geometry(
        rows=rows,
        cols=cols,
        stride=stride,
        column_masks=columns,
        full=sum(columns),
        bottoms=sum(1 << (c * stride) for c in range(cols)),
        centre=sum(columns[c] for c in middle),
        centre_order=tuple(sorted(range(cols), key=lambda c: (abs(2 * c - (cols - 1)), c))),
        shifts=(1, rows, rows + 1, rows + 2),
    )


def playable(g: Geometry, mask: int) -> int:
    """The cell each column's next stone falls to (none for a full column)."""
    return (mask + g.bottoms) & g.full


def landing(g: Geometry, mask: int, col: int) -> int:
    """The cell a stone dropped into ``col`` falls to; 0 when the column is full."""
    return playable(g, mask) & g.column_masks[col]


def column_of(g: Geometry, cell: int) -> int:
    """The column of a one-cell mask."""
    return (cell.bit_length() - 1) // g.stride


def row_of(g: Geometry, cell: int) -> int:
    """The row of a one-cell mask, 0 the bottom."""
    return (cell.bit_length() - 1) % g.stride


def cells(mask: int) -> list[int]:
    """The one-cell masks of ``mask``, lowest bit first."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low)
        mask ^= low
    return out


def has_four(g: Geometry, stones: int) -> bool:
    """Whether ``stones`` hold four in a row."""
    for s in g.shifts:
        pairs = stones & (stones >> s)
        if pairs & (pairs >> 2 * s):
            return True
    return False


def winning_cells(g: Geometry, stones: int, mask: int) -> int:
    """The empty cells where one more stone of ``stones`` would make four in a row (reachable now or not)."""
    found = (stones << 1) & (stones << 2) & (stones << 3)  # three below
    for s in (g.rows, g.rows + 1, g.rows + 2):
        two = (stones << s) & (stones << 2 * s)
        found |= two & (stones << 3 * s)  # three on one side
        found |= two & (stones >> s)  # two on one side, one on the other
        two = (stones >> s) & (stones >> 2 * s)
        found |= two & (stones << s)
        found |= two & (stones >> 3 * s)
    return found & (g.full ^ mask)


def four_through(g: Geometry, stones: int, cell: int) -> list[int]:
    """The cells of a four in a row of ``stones`` through ``cell`` (one of them), lowest first; empty when
    there is none."""
    for s in g.shifts:
        run = cell
        for direction in (1, -1):
            step = cell
            while True:
                step = step << s if direction > 0 else step >> s
                if not step & stones or not step & g.full:
                    break
                run |= step
        if run.bit_count() >= 4:
            line = cells(run)
            at = line.index(cell)
            start = min(max(0, at - 3), len(line) - 4)
            return line[start : start + 4]
    return []


def open_lines(g: Geometry, stones: int, mask: int, need: int) -> bool:
    """Whether some line of four holds none of the other player's stones and at least ``4 - need`` of
    ``stones`` (so ``need`` more stones could complete it)."""
    if need >= 4:
        need = 4
    free = stones | (g.full ^ mask)
    least = 4 - need
    for s in g.shifts:
        fits = free & (free >> s) & (free >> 2 * s) & (free >> 3 * s)
        if not fits:
            continue
        if least <= 0:
            return True
        a, b, c, d = stones, stones >> s, stones >> 2 * s, stones >> 3 * s
        if least == 1:
            held = a | b | c | d
        elif least == 2:
            held = (a & (b | c | d)) | (b & (c | d)) | (c & d)
        else:
            held = (a & b & (c | d)) | (c & d & (a | b))
        if held & fits:
            return True
    return False


def replay(g: Geometry, columns: tuple[int, ...], you_first: bool) -> tuple[int, int, tuple[int, ...]]:
    """Your stones, the engine's and the cells of each side's latest stone after ``columns`` were played in
    turn from the empty board (you first where ``you_first``)."""
    you = engine = 0
    latest: dict[bool, int] = {}
    for ply, col in enumerate(columns):
        cell = landing(g, you | engine, col)
        yours = (ply % 2 == 0) == you_first
        if yours:
            you |= cell
        else:
            engine |= cell
        latest[yours] = cell
    return you, engine, tuple(latest[side] for side in (True, False) if side in latest)


def line_words(g: Geometry, line: list[int]) -> str:
    """Where a line of cells lies: ``across row 2, columns 3 to 6``, ``up column 4, rows 1 to 4`` or
    ``diagonally from column 2 row 1 to column 5 row 4`` (rows counted from the bottom)."""
    spots = sorted((column_of(g, cell) + 1, row_of(g, cell) + 1) for cell in line)
    (c0, r0), (c1, r1) = spots[0], spots[-1]
    if r0 == r1:
        return f"across row {r0}, columns {c0} to {c1}"
    if c0 == c1:
        return f"up column {c0}, rows {r0} to {r1}"
    return f"diagonally from column {c0} row {r0} to column {c1} row {r1}"


def cell_words(g: Geometry, cell: int) -> str:
    """``column 4 row 2`` (rows counted from the bottom)."""
    return f"column {column_of(g, cell) + 1} row {row_of(g, cell) + 1}"
