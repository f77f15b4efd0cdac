"""Falling blocks' rules written again from the prompt, not from the env's code: pieces as cell sets turned
about the origin, a drop that moves a piece down one row at a time from above the well, full rows cleared,
and a breadth-first search for the fewest placements. The env's tests and its rationale check use them."""

from __future__ import annotations

#: The pieces at rotate 0 as the prompt draws them (rows top first, ``#`` a cell).
DRAWN = {
    "I": ["####"],
    "O": ["##", "##"],
    "T": [".#.", "###"],
    "S": [".##", "##."],
    "Z": ["##.", ".##"],
    "J": ["#..", "###"],
    "L": ["..#", "###"],
}

Cells = frozenset[tuple[int, int]]  # (column, row) with rows counted up from the piece's bottom


def cells(piece: str, rotation: int) -> Cells:
    """The piece turned ``rotation`` quarter turns clockwise, its lowest and leftmost cells at 0."""
    rows = DRAWN[piece]
    at = {(x, len(rows) - 1 - r) for r, line in enumerate(rows) for x, ch in enumerate(line) if ch == "#"}
    for _ in range(rotation):
        at = {(y, -x) for x, y in at}  # clockwise, with rows counted upwards
    left, low = min(x for x, _ in at), min(y for _, y in at)
    return frozenset((x - left, y - low) for x, y in at)


def drop(filled: frozenset, piece: str, rotation: int, column: int, width: int, height: int):
    """The filled cells after dropping the piece with its leftmost cell at ``column`` (from 0), the rows it
    rests on (lowest, highest), the rows it cleared (counted before clearing) and whether it topped out."""
    shape = cells(piece, rotation)
    assert all(0 <= column + x < width for x, _ in shape)
    y = height + 4
    while all((column + x, y - 1 + dy) not in filled and y - 1 + dy >= 0 for x, dy in shape):
        y -= 1
    placed = {(column + x, y + dy) for x, dy in shape}
    low, high = min(r for _, r in placed), max(r for _, r in placed)
    if high >= height:
        return filled, (low, high), [], True
    after = set(filled) | placed
    full = [r for r in range(low, high + 1) if all((c, r) in after for c in range(width))]
    kept = {(c, r - sum(f < r for f in full)) for c, r in after if r not in full}
    return frozenset(kept), (low, high), full, False


def from_rows(board: tuple[int, ...]) -> frozenset:
    """The filled cells of a board given as row masks from the bottom up (bit ``c`` column ``c``)."""
    return frozenset((c, r) for r, row in enumerate(board) for c in range(row.bit_length()) if row >> c & 1)


def fewest_placements(filled: frozenset, sequence: str, lines: int, width: int, height: int, most: int):
    """The fewest drops of ``sequence`` in order that clear ``lines`` lines, searching up to ``most``
    drops (None: none within them)."""
    frontier = {(filled, lines)}
    for depth in range(1, min(most, len(sequence)) + 1):
        after = set()
        for board, left in frontier:
            for rotation in range(4):
                wide = max(x for x, _ in cells(sequence[depth - 1], rotation)) + 1
                for column in range(width - wide + 1):
                    new, _, cleared, out = drop(board, sequence[depth - 1], rotation, column, width, height)
                    if out:
                        continue
                    if len(cleared) >= left:
                        return depth
                    after.add((new, left - len(cleared)))
        frontier = after
    return None
