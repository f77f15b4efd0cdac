"""Every way to pack a region with a level's pieces, as a graph, and from it the fewest actions that finish
a partial packing.

Pieces with the same shape up to the allowed turns (and mirror images, where allowed) are interchangeable,
so the search packs shape classes, not letters. It fills the region's first free cell (reading order) with
each placement that covers it and fits; a sub-problem (the cells filled, the pieces of each class left)
is searched once, whatever placements led to it, and kept when some packing completes it. What is kept is
a graph whose paths from the empty region to the full one are exactly the packings; it may hold many
more packings than nodes. The search stops, returning ``None``, past a node budget (the generator then
draws another level).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from vlm_envs.envs.polyomino_packing.shapes import Cell, Shape, canonical, orientations

#: A placement as the solver knows it: (shape class, bit mask of its cells, :attr:`Packings.width`).
Placement = tuple[int, int]
#: A sub-problem: (the cells filled, the pieces of each class left).
Node = tuple[int, tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class Packings:
    """Every packing of a region with a level's pieces, by shape class, as a graph of sub-problems."""

    #: The region's cells in reading order.
    cells: tuple[Cell, ...]
    #: Bits a row of a mask (bit ``row * width + column`` is that cell; a spare column on the right).
    width: int
    #: Each piece's shape class (pieces of one class are interchangeable).
    classes: tuple[int, ...]
    #: Every sub-problem some packing completes, children before parents (the full region first, the
    #: empty one last), with its placements on the way to a packing: (placement, sub-problem after it).
    graph: tuple[tuple[Node, tuple[tuple[Placement, Node], ...]], ...]

    def mask(self, cells: Sequence[Cell]) -> int:
        """The bit mask of ``cells`` (all in the region)."""
        return sum(1 << (r * self.width + c) for r, c in cells)

    def cells_of(self, mask: int) -> tuple[Cell, ...]:
        """The cells of a mask, in reading order."""
        return tuple((r, c) for r, c in self.cells if mask >> (r * self.width + c) & 1)

    def best(self, placed: Mapping[int, int]) -> tuple[list[Placement], int]:
        """A packing that keeps most of the ``placed`` pieces (piece -> mask) where they are (the first
        such in the search's order) and how many it keeps."""
        kept = {(self.classes[p], m) for p, m in placed.items()}
        score: dict[Node, int] = {}
        choice: dict[Node, tuple[Placement, Node]] = {}
        for node, edges in self.graph:
            if not edges:
                score[node] = 0
                continue
            for placement, child in edges:
                value = (placement in kept) + score[child]
                if node not in score or value > score[node]:
                    score[node], choice[node] = value, (placement, child)
        node, packing = self.graph[-1][0], []
        while node in choice:
            placement, node = choice[node]
            packing.append(placement)
        return packing, score[self.graph[-1][0]]

    def actions_left(self, placed: Mapping[int, int], removals: bool) -> int | None:
        """The fewest actions that finish the packing from ``placed`` (piece -> mask): with ``removals``,
        take back every piece the best packing moves and place the rest; without, the pieces left to place,
        ``None`` when no packing keeps every piece where it is."""
        _, kept = self.best(placed)
        pieces = len(self.classes)
        if removals:
            return pieces + len(placed) - 2 * kept
        return pieces - len(placed) if kept == len(placed) else None


class _OverBudget(Exception):
    pass


def pack(region: Sequence[Cell], pieces: Sequence[Shape], mirror: bool, max_nodes: int) -> Packings | None:
    """Every packing of ``region`` with ``pieces`` (turned, and mirrored where ``mirror``) as a graph;
    ``None`` past ``max_nodes`` sub-problems searched. A placement that leaves a free pocket smaller than
    every piece left is not tried further."""
    cells = tuple(sorted(region))
    width = max(c for _, c in cells) + 2  # a spare column: a shift by one never wraps to the next row
    bit = {cell: 1 << (cell[0] * width + cell[1]) for cell in cells}
    kinds: dict[Shape, int] = {}
    classes = tuple(kinds.setdefault(canonical(p, mirror), len(kinds)) for p in pieces)
    counts = [classes.count(k) for k in range(len(kinds))]
    sizes = [len(shape) for shape in kinds]
    full = sum(bit.values())
    # per region cell: the placements whose first cell (in reading order) it is, with the cells around
    starts: dict[int, list[tuple[int, int, int]]] = {b: [] for b in bit.values()}
    for shape, k in kinds.items():
        for turned in orientations(shape, mirror):
            first = turned[0]
            for r, c in cells:
                spots = [bit.get((r + dr - first[0], c + dc - first[1]), 0) for dr, dc in turned]
                if all(spots):
                    bits = sum(spots)
                    starts[bit[(r, c)]].append((k, bits, _around(bits, width) & full & ~bits))
    live: dict[Node, tuple[tuple[Placement, Node], ...]] = {}
    dead: set[Node] = set()

    def search(filled: int) -> bool:
        node = (filled, tuple(counts))
        if node in live:
            return True
        if node in dead:
            return False
        if len(live) + len(dead) >= max_nodes:
            raise _OverBudget
        if filled == full:
            live[node] = ()
            return True
        free = full & ~filled
        # no piece left is smaller than this: a free pocket of fewer cells can never be filled
        smallest = min(s for s, n in zip(sizes, counts, strict=True) if n)
        edges = []
        for k, bits, rim in starts[free & -free]:
            if not counts[k] or bits & filled:
                continue
            rest = free & ~bits
            rim &= rest
            while rim:  # each free pocket touching the piece: does it reach ``smallest`` cells?
                area = rim & -rim
                while area.bit_count() < smallest:
                    more = (area | area << 1 | area >> 1 | area << width | area >> width) & rest
                    if more == area:
                        break
                    area = more
                if area.bit_count() < smallest:
                    break
                rim &= ~area
            if rim:
                continue
            counts[k] -= 1
            if search(filled | bits):
                edges.append(((k, bits), (filled | bits, tuple(counts))))
            counts[k] += 1
        if edges:
            live[node] = tuple(edges)
        else:
            dead.add(node)
        return bool(edges)

    try:
        search(0)
    except _OverBudget:
        return None
    return Packings(cells, width, classes, tuple(live.items()))


def _around(bits: int, width: int) -> int:
    """``bits`` and the cells next to them, on a grid ``width`` bits a row."""
    return bits | bits << 1 | bits >> 1 | bits << width | bits >> width
