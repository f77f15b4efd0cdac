"""Levels: garbage rows, a seeded piece sequence, and a plan of the fewest placements that wins.

A level is built around its plan. The sequence is drawn in bags of the seven pieces; then, for each of the
first pieces in turn, a placement is drawn among those that clear a line: those whose bottom row can close
a gap of its own shape in the top garbage row (the piece must come to rest in it, under nothing the earlier
pieces left; the gap is then cut from the row, off the columns of the gap above it, so the rows clear in
order from the top), and those that fill a row of what earlier pieces left. Garbage rows under those the
plan clears get gaps of random pieces' bottom rows. The plan is then replayed on the level.

A plan is the fewest placements when the solver's lower bound says as many (a row can clear only after the
one above it, so the top ``lines`` rows take ``lines`` placements): nearly always; otherwise the solver
searches, within :data:`GENERATION_NODES`, for the fewest. A level whose plan is not shown the fewest is
drawn again (attempt ``a`` of seed ``s`` draws from ``numpy.random.default_rng([s, a, SALT])``); after
:data:`MAX_ATTEMPTS` the first one is kept with its plan, which wins, marked not exact.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np

from vlm_envs.envs.falling_blocks.pieces import PIECES, ROTATIONS, bag_sequence, distinct_rotations, shape
from vlm_envs.envs.falling_blocks.solver import Placement, Solver, fewest_placements_bound
from vlm_envs.envs.falling_blocks.well import Board, column_heights, drop

#: Mixed into every level's random draws.
SALT = 0xB10C5
#: Levels drawn per seed before the first is kept without a proof that its plan is the fewest.
MAX_ATTEMPTS = 20
#: Drops the solver may try to show a level's plan the fewest, where the lower bound does not.
GENERATION_NODES = 2_000


@dataclasses.dataclass(frozen=True)
class LevelSpec:
    """What to generate: the well, its garbage rows, the lines to clear and the pieces in the sequence."""

    width: int
    depth: int
    garbage_rows: int
    lines: int
    pieces: int


@dataclasses.dataclass(frozen=True)
class Level:
    """A level: its board and piece sequence, a winning plan, and whether that plan is the fewest."""

    board: Board
    sequence: str
    plan: tuple[Placement, ...]
    optimal_exact: bool
    attempt: int


class GenerationError(ValueError):
    """No level of the spec could be built (a config error: the well is too shallow for its garbage)."""


def _gap_placements(
    piece: str, width: int, below: int, depth: int, above: Board, avoid: int
) -> list[tuple[Placement, int, int, Board]]:
    """The placements of ``piece`` that come to rest in a gap of their bottom row's shape cut in a garbage
    row with ``below`` garbage rows under it and the rows ``above`` over it (a well ``depth`` rows deep),
    the gap off the columns ``avoid``: (placement, gap, lines the drop clears, the rows above the next
    garbage row after it)."""
    full = (1 << width) - 1
    out = []
    for rotation in distinct_rotations(piece):
        turned = shape(piece, rotation)
        for column in range(width - turned.width + 1):
            gap = turned.shifted[column][0]
            if gap & avoid or gap == full:
                continue
            board = (full,) * below + (full & ~gap,) + above
            result = drop(board, turned, column, width, depth, column_heights(board, width))
            if result.topped_out or result.row != below:
                continue
            out.append(((rotation, column), gap, result.cleared, result.board[below:]))
    return out


def _clearing_placements(
    piece: str, width: int, below: int, depth: int, above: Board
) -> list[tuple[Placement, int, int, Board]]:
    """The placements of ``piece`` that clear rows of ``above`` (what earlier pieces left over ``below``
    garbage rows): (placement, 0 for no gap, lines cleared, the rows over the garbage after the drop)."""
    full = (1 << width) - 1
    board = (full,) * below + above
    heights = column_heights(board, width)
    out = []
    for rotation in distinct_rotations(piece):
        turned = shape(piece, rotation)
        for column in range(width - turned.width + 1):
            result = drop(board, turned, column, width, depth, heights)
            if result.cleared and not result.topped_out:
                out.append(((rotation, column), 0, result.cleared, result.board[below:]))
    return out


def _gap(width: int, avoid: int, rng: np.random.Generator) -> int:
    """A gap of a random piece's bottom row (a random rotation and column), off the columns ``avoid``."""
    while True:
        turned = shape(PIECES[int(rng.integers(len(PIECES)))], int(rng.integers(ROTATIONS)))
        gap = turned.shifted[int(rng.integers(width - turned.width + 1))][0]
        if not gap & avoid and gap != (1 << width) - 1:
            return gap


def _attempt(spec: LevelSpec, seed: int, attempt: int) -> tuple[Board, str, tuple[Placement, ...]] | None:
    """One drawn level and its plan, or None where the plan did not fit the well."""
    rng = np.random.default_rng([seed, attempt, SALT])
    sequence = bag_sequence(spec.pieces, rng)
    width, full = spec.width, (1 << spec.width) - 1
    gaps: list[int] = []  # the cleared rows' gaps, top first
    plan: list[Placement] = []
    above: Board = ()
    cleared = 0
    while cleared < spec.lines:
        below = spec.garbage_rows - len(gaps) - 1
        if below < 0 or len(plan) >= spec.pieces:
            return None
        piece = sequence[len(plan)]
        options = _gap_placements(piece, width, below, spec.depth, above, gaps[-1] if gaps else 0)
        options += _clearing_placements(piece, width, below + 1, spec.depth, above)
        if not options:
            return None
        placement, gap, lines, above = options[int(rng.integers(len(options)))]
        cleared += lines  # the gap's row (where it cut one), and perhaps rows of what earlier pieces left
        plan.append(placement)
        if gap:
            gaps.append(gap)
    while len(gaps) < spec.garbage_rows:
        gaps.append(_gap(width, gaps[-1] if gaps else 0, rng))
    board = tuple(full & ~gap for gap in reversed(gaps))
    return board, sequence, tuple(plan)


def _replayed(board: Board, sequence: str, plan: tuple[Placement, ...], spec: LevelSpec) -> int:
    """The lines ``plan`` clears from ``board`` (0 where a piece tops out or leaves the well)."""
    cleared = 0
    for index, (rotation, column) in enumerate(plan):
        turned = shape(sequence[index], rotation)
        if not 0 <= column <= spec.width - turned.width:
            return 0
        result = drop(board, turned, column, spec.width, spec.depth, column_heights(board, spec.width))
        if result.topped_out:
            return 0
        board, cleared = result.board, cleared + result.cleared
    return cleared


@lru_cache(maxsize=256)
def generate_level(spec: LevelSpec, seed: int) -> Level:
    """The level of ``seed``: the first attempt whose plan is shown the fewest placements (same seed, same
    level); a ``GenerationError`` where no attempt builds one."""
    first: Level | None = None
    for attempt in range(MAX_ATTEMPTS):
        drawn = _attempt(spec, seed, attempt)
        if drawn is None:
            continue
        board, sequence, plan = drawn
        if _replayed(board, sequence, plan, spec) < spec.lines:
            continue
        if fewest_placements_bound(board, spec.lines, spec.width) == len(plan):
            return Level(board, sequence, plan, True, attempt)
        found = Solver(spec.width, spec.depth, sequence).solve(board, 0, spec.lines, GENERATION_NODES)
        if found.plan is not None:
            return Level(board, sequence, found.plan, True, attempt)
        first = first or Level(board, sequence, plan, False, attempt)
    if first is None:
        raise GenerationError(
            f"no level of {spec.garbage_rows} garbage rows in a {spec.width}x{spec.depth} well let "
            f"{spec.lines} lines clear (seed {seed}): make the well deeper or clear fewer lines"
        )
    return first
