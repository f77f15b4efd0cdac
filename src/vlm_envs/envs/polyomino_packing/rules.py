"""PolyominoPacking's rules and the oracle's plan: where an action puts a piece, why a move is refused, and
the packing the oracle aims at from any position (with the fewest actions that reach it).

``placed`` maps a piece (0 is A) to the cells it covers. A placement is refused when the piece is not in
the level, is already on the board, would be mirrored where mirroring is not allowed, or would cover a cell
outside the region or of another piece; a removal when removals are off or the piece is not on the board.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from vlm_envs.envs.polyomino_packing.actions import Action, letter
from vlm_envs.envs.polyomino_packing.generator import Level
from vlm_envs.envs.polyomino_packing.shapes import Cell, normalized, orientations, oriented
from vlm_envs.state_signals import UNREACHABLE

Placed = Mapping[int, tuple[Cell, ...]]


def covered(level: Level, action: Action) -> tuple[Cell, ...]:
    """The cells a placement puts its piece on (in reading order; maybe off the board)."""
    shape = oriented(level.pieces[action.piece], action.degrees, action.mirror)
    return tuple(sorted((action.row + r, action.col + c) for r, c in shape))


def refusal(level: Level, placed: Placed, action: Action, mirror: bool, removals: bool) -> str | None:
    """Why ``action`` cannot be played, or ``None`` when it can."""
    pieces = len(level.pieces)
    if not 0 <= action.piece < pieces:
        return f"there is no piece {letter(action.piece)} (the pieces are A to {letter(pieces - 1)})"
    name = letter(action.piece)
    if action.remove:
        if not removals:
            return "pieces may not be taken back in this episode"
        return None if action.piece in placed else f"piece {name} is not on the board"
    if action.piece in placed:
        again = "take it back first to move it" if removals else "placed pieces stay where they are"
        return f"piece {name} is already on the board ({again})"
    if action.mirror and not mirror:
        return "pieces may only be turned, not mirrored, in this episode"
    owner = {c: p for p, cells in placed.items() for c in cells}
    inside = set(level.region)
    for r, c in covered(level, action):
        if (r, c) not in inside:
            return f"piece {name} would cover row {r + 1}, column {c + 1}, outside the region"
        if (r, c) in owner:
            return f"piece {name} would overlap piece {letter(owner[(r, c)])} at row {r + 1}, column {c + 1}"
    return None


def fitting(level: Level, placed: Placed, piece: int, mirror: bool) -> list[Action]:
    """Every placement of an unplaced ``piece`` that the rules allow (one per distinct orientation)."""
    owner = {c for cells in placed.values() for c in cells}
    free = set(level.region) - owner
    out = []
    for shape, (degrees, flip) in orientations(level.pieces[piece], mirror).items():
        for row in range(level.rows):
            for col in range(level.cols):
                if all((row + r, col + c) in free for r, c in shape):
                    out.append(Action(piece, False, degrees, flip, row, col))
    return out


def played(level: Level, placed: Placed, action: Action) -> dict[int, tuple[Cell, ...]]:
    """The pieces on the board after ``action`` (one :func:`refusal` allows)."""
    after = dict(placed)
    if action.remove:
        del after[action.piece]
    else:
        after[action.piece] = covered(level, action)
    return dict(sorted(after.items()))


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where each piece goes in the packing the oracle aims at, and the fewest actions from here
    (``None``: unknown, the level's packings past the search budget; ``UNREACHABLE``: no packing keeps
    every piece where it is and pieces may not be taken back)."""

    target: dict[int, tuple[Cell, ...]]
    actions: int | None
    #: Placed pieces the target keeps where they are.
    kept: int


def plan(level: Level, placed: Placed, removals: bool) -> Plan:
    """The packing that keeps most placed pieces where they are (the generator's own where the level's
    packings are unknown), each piece given its place: pieces that stay keep theirs, the others take the
    packing's remaining places of their shape in letter order."""
    packings = level.packings
    if packings is None:
        target = dict(enumerate(level.solution))
        return Plan(target, None, sum(cells == target[p] for p, cells in placed.items()))
    masks = {p: packings.mask(cells) for p, cells in placed.items()}
    packing, kept = packings.best(masks)
    free = list(packing)
    target: dict[int, tuple[Cell, ...]] = {}
    for p, mask in masks.items():
        if (packings.classes[p], mask) in free:
            free.remove((packings.classes[p], mask))
            target[p] = placed[p]
    for p in range(len(level.pieces)):
        if p not in target:
            spot = next(s for s in free if s[0] == packings.classes[p])
            free.remove(spot)
            target[p] = packings.cells_of(spot[1])
    actions = packings.actions_left(masks, removals)
    return Plan(dict(sorted(target.items())), UNREACHABLE if actions is None else actions, kept)


def next_action(level: Level, placed: Placed, target: Placed, mirror: bool) -> Action | None:
    """The oracle's action toward ``target``: take back the first piece out of its place, else place the
    first piece not yet placed; ``None`` when every piece is in place."""
    for p, cells in placed.items():
        if target[p] != cells:
            return Action(p, remove=True)
    for p, cells in target.items():
        if p not in placed:
            degrees, flip = orientations(level.pieces[p], mirror)[normalized(cells)]
            return Action(p, False, degrees, flip, min(r for r, _ in cells), min(c for _, c in cells))
    return None
