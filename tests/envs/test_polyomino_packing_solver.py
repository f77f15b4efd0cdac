"""PolyominoPacking's geometry, packing search and rules on hand-built levels: turns and mirrors, every
packing found once (against a brute-force count), each refused action's reason, the oracle's plan, and the
distance against an independent breadth-first search over every position of small levels."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pytest
from rationale_truth import orientations_of, packable

from vlm_envs.envs.polyomino_packing.actions import Action
from vlm_envs.envs.polyomino_packing.generator import Level, generate
from vlm_envs.envs.polyomino_packing.rules import covered, next_action, plan, played, refusal
from vlm_envs.envs.polyomino_packing.shapes import canonical, mirrored, normalized, orientations, turned
from vlm_envs.envs.polyomino_packing.solver import pack
from vlm_envs.state_signals import UNREACHABLE

L_TROMINO = ((0, 0), (1, 0), (1, 1))  # #. / ##
T_TETROMINO = ((0, 0), (0, 1), (0, 2), (1, 1))  # ### / .#.
S_TETROMINO = ((0, 1), (0, 2), (1, 0), (1, 1))  # .## / ##.
F_PENTOMINO = ((0, 1), (0, 2), (1, 0), (1, 1), (2, 1))
L_TETROMINO = ((0, 0), (0, 1), (0, 2), (1, 0))  # ### / #..


def level_of(region: list, pieces: tuple, mirror: bool = False) -> Level:
    """A hand-built level (its solution left empty: these tests never read it)."""
    cells = tuple(sorted(region))
    packings = pack(cells, pieces, mirror, 10_000)
    rows, cols = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
    return Level(rows, cols, cells, pieces, (), packings, 0)


def rectangle(rows: int, cols: int) -> list:
    return [(r, c) for r in range(rows) for c in range(cols)]


def test_a_quarter_turn_is_clockwise_and_mirror_goes_first():
    assert turned(L_TROMINO, 90) == ((0, 0), (0, 1), (1, 0))  # ## / #.
    assert turned(L_TROMINO, 180) == ((0, 0), (0, 1), (1, 1))  # ## / .#
    assert turned(L_TROMINO, 360) == L_TROMINO
    assert mirrored(L_TROMINO) == ((0, 1), (1, 0), (1, 1))  # .# / ##
    assert normalized([(5, 7), (6, 7)]) == ((0, 0), (1, 0))
    # orientations: a T has four either way, an S two turned and four mirrored, the F eight
    assert [len(orientations(s, m)) for s in (T_TETROMINO, S_TETROMINO, F_PENTOMINO) for m in (0, 1)] == [
        4,
        4,
        2,
        4,
        4,
        8,
    ]
    # an S and a Z are one piece only where mirroring is allowed
    z = mirrored(S_TETROMINO)
    assert canonical(S_TETROMINO, False) != canonical(z, False) and canonical(S_TETROMINO, True) == canonical(
        z, True
    )


# ----- the rules on a hand-built level -----


def test_a_placement_puts_the_turned_piece_with_its_bounding_box_at_the_cell():
    level = level_of(rectangle(2, 3), (L_TROMINO, L_TROMINO))
    # turned 90 the L is ## / #.: its box's top-left at row 1 col 2 (0-based (0, 1))
    assert covered(level, Action(0, False, 90, False, 0, 1)) == ((0, 1), (0, 2), (1, 1))
    # turned 270 it is .# / ##: the box's top-left cell (0, 0) is not one of its cells
    assert covered(level, Action(1, False, 270, False, 0, 0)) == ((0, 1), (1, 0), (1, 1))


def test_each_refused_action_says_why():
    level = level_of(rectangle(2, 3), (L_TROMINO, L_TROMINO))
    placed = played(level, {}, Action(0, False, 0, False, 0, 0))  # A on (0,0) (1,0) (1,1)
    cases = {
        Action(5, False, 0, False, 0, 0): "there is no piece F (the pieces are A to B)",
        Action(0, False, 0, False, 0, 1): "piece A is already on the board (take it back first",
        Action(1, False, 0, True, 0, 1): "only be turned, not mirrored",
        Action(1, False, 0, False, 1, 2): "would cover row 3, column 3, outside the region",
        Action(1, False, 90, False, 0, 0): "would overlap piece A at row 1, column 1",
        Action(1, remove=True): "piece B is not on the board",
    }
    for action, says in cases.items():
        assert says in refusal(level, placed, action, mirror=False, removals=True), action
    assert refusal(level, placed, Action(0, remove=True), False, removals=False) == (
        "pieces may not be taken back in this episode"
    )
    assert "stay where they are" in refusal(level, placed, Action(0, False, 0, False, 0, 0), False, False)
    assert refusal(level, placed, Action(1, False, 180, False, 0, 1), False, True) is None


def test_the_search_finds_every_packing_once_and_none_where_there_is_none():
    # two L trominoes fill a 2x3 rectangle two ways; a 3x3 one needs three, and a 2x2 square no L pair
    assert _packings(rectangle(2, 3), (L_TROMINO, L_TROMINO)) == 2
    assert _packings(rectangle(3, 3), (L_TROMINO,) * 3) == _count_by_brute_force(
        rectangle(3, 3), [L_TROMINO] * 3
    )
    assert pack(rectangle(2, 3), (T_TETROMINO, ((0, 0), (0, 1))), False, 1000).graph == ()
    # an L and a J tetromino fill a 2x4 rectangle only where the J may be mirrored into an L
    region, j_tetromino = rectangle(2, 4), mirrored(L_TETROMINO)
    assert (
        _packings(region, (L_TETROMINO, j_tetromino))
        == 0
        < _packings(region, (L_TETROMINO, j_tetromino), True)
    )
    for pieces in ([L_TETROMINO] * 2, [j_tetromino] * 2):
        assert _packings(region, tuple(pieces)) == _count_by_brute_force(region, pieces) > 0
    assert _packings(region, (L_TETROMINO,) * 2, True) == _count_by_brute_force(
        region, [L_TETROMINO] * 2, True
    )
    assert pack(rectangle(4, 5), (F_PENTOMINO,) * 4, True, 1) is None  # past the node budget


def _packings(region: list, pieces: tuple, mirror: bool = False) -> int:
    """Packings of the level's graph, by shape class (counting paths from the empty region)."""
    found = pack(region, pieces, mirror, 100_000)
    paths: dict = {}
    for node, edges in found.graph:
        paths[node] = 1 if not edges else sum(paths[child] for _, child in edges)
    return paths[found.graph[-1][0]] if found.graph else 0


def _count_by_brute_force(region: list, shapes: list, mirror: bool = False) -> int:
    """Packings with the pieces of one shape counted once (as the search counts them): every assignment
    of orientations and places, divided by the orderings of equal pieces."""

    def count(free: frozenset, left: list) -> int:
        if not free:
            return 1
        first, total = min(free), 0
        for i, shape in enumerate(left):
            for form in orientations_of(frozenset(shape), mirror):
                anchor = min(form)
                cells = {(r - anchor[0] + first[0], c - anchor[1] + first[1]) for r, c in form}
                if cells <= free:
                    total += count(free - cells, left[:i] + left[i + 1 :])
        return total

    kinds = [canonical(s, mirror) for s in shapes]
    return count(frozenset(region), list(shapes)) // math.prod(
        math.factorial(kinds.count(k)) for k in set(kinds)
    )


# ----- the distance against an independent search -----


def _all_placements(level: Level, mirror: bool) -> dict[int, list[frozenset]]:
    """Every place each piece fits in the region (test-side geometry)."""
    region = set(level.region)
    out = {}
    for p, shape in enumerate(level.pieces):
        spots = set()
        for form in orientations_of(frozenset(shape), mirror):
            for r, c in itertools.product(range(level.rows), range(level.cols)):  # the box's top left
                cells = frozenset((r + dr, c + dc) for dr, dc in form)
                if cells <= region:
                    spots.add(cells)
        out[p] = sorted(spots, key=sorted)
    return out


def _bfs_distances(level: Level, mirror: bool) -> dict[frozenset, int]:
    """Fewest actions (a placement or a removal) from every position to a full packing: a breadth-first
    search over every position from the full packings (actions undo each other)."""
    spots = _all_placements(level, mirror)
    positions, frontier = {frozenset()}, [frozenset()]
    while frontier:  # every position (pieces never overlap)
        nxt = []
        for position in frontier:
            used = {c for _, cells in position for c in cells}
            placed = {p for p, _ in position}
            for p in spots:
                if p in placed:
                    continue
                for cells in spots[p]:
                    if not cells & used and (after := position | {(p, cells)}) not in positions:
                        positions.add(after)
                        nxt.append(after)
        frontier = nxt
    pieces = len(level.pieces)
    distance = {s: 0 for s in positions if len(s) == pieces}
    queue = deque(distance)
    neighbours: dict[frozenset, list] = {s: [] for s in positions}
    for s in positions:
        for item in s:
            neighbours[s].append(s - {item})
            neighbours[s - {item}].append(s)
    while queue:
        at = queue.popleft()
        for nxt_state in neighbours[at]:
            if nxt_state not in distance:
                distance[nxt_state] = distance[at] + 1
                queue.append(nxt_state)
    return distance


@pytest.mark.parametrize(
    ("shape", "pieces", "mirror", "seed"),
    [
        ("rectangle", 3, False, 1),
        ("rectangle", 3, False, 2),
        ("irregular", 3, True, 0),
        ("irregular", 4, True, 0),
    ],
)
def test_the_distance_is_the_fewest_actions_from_every_position(shape, pieces, mirror, seed):
    level = generate(shape, pieces, 3, 4, mirror, np.random.default_rng(seed))
    truth = _bfs_distances(level, mirror)
    assert len(truth) > 100
    goals = {s for s, d in truth.items() if d == 0}
    for position, want in truth.items():
        placed = {p: tuple(sorted(cells)) for p, cells in position}
        assert plan(level, placed, removals=True).actions == want, position
        # without removals: the pieces left where a full packing holds this one, else unreachable
        completes = any(position <= goal for goal in goals)
        left = pieces - len(position)
        assert plan(level, placed, removals=False).actions == (left if completes else UNREACHABLE)


# ----- the oracle's plan -----


def test_the_oracle_aims_at_a_packing_that_keeps_what_it_can():
    level = level_of(rectangle(2, 3), (L_TROMINO, L_TROMINO))
    wrong = {0: ((0, 0), (0, 1), (1, 1))}  # an L that leaves (0,2) and (1,0) apart: no packing keeps it
    known = plan(level, wrong, removals=True)
    assert known.kept == 0 and known.actions == 3 and next_action(level, wrong, known.target, False).remove
    right = {0: ((0, 0), (1, 0), (1, 1))}
    known = plan(level, right, removals=True)
    assert known.kept == 1 and known.actions == 1 and known.target[1] == ((0, 1), (0, 2), (1, 2))
    assert next_action(level, right, known.target, False) == Action(1, False, 180, False, 0, 1)
    assert packable(frozenset(level.region) - set(right[0]), [frozenset(L_TROMINO)], False)
