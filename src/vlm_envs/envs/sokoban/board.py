"""Sokoban rules: the static layout, the moving state, one move, and the ASCII / slime-grid views.

Cells are flat indices ``r * cols + c``. The ASCII view uses the Boxoban symbols: ``#`` wall, space
floor, ``.`` target, ``$`` box, ``*`` box on target, ``@`` player, ``+`` player on target. Cells
outside the grid count as walls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

#: Move letters in the order of :data:`DELTAS` and their (row, col) steps.
MOVES = "UDLR"
DELTAS: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))
MOVE_NAMES = ("Up", "Down", "Left", "Right")

WALL, FLOOR, TARGET, BOX, BOX_ON_TARGET, PLAYER, PLAYER_ON_TARGET = "#", " ", ".", "$", "*", "@", "+"
LEGEND = {
    WALL: "wall",
    FLOOR: "floor",
    TARGET: "target",
    BOX: "box",
    BOX_ON_TARGET: "box on target",
    PLAYER: "player",
    PLAYER_ON_TARGET: "player on target",
}
#: The slime example's base-grid codes (0 wall, 1 floor, 2 target).
SLIME_WALL, SLIME_FLOOR, SLIME_TARGET = 0, 1, 2


class LevelError(ValueError):
    """A level description that is not a playable Sokoban level."""


@dataclasses.dataclass(frozen=True)
class Layout:
    """The static part of a level: grid size, walls (one byte per cell, 1 = wall) and targets."""

    rows: int
    cols: int
    walls: bytes
    targets: frozenset[int]
    #: ``step[d][cell]``: the neighbour of ``cell`` in direction ``d``, or -1 for a wall / the grid edge.
    step: tuple[tuple[int, ...], ...] = dataclasses.field(init=False, repr=False, compare=False)
    #: The ASCII view of the walls, floor and targets alone (rows joined by newlines).
    static_text: str = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.walls) != self.rows * self.cols:
            raise LevelError(f"walls holds {len(self.walls)} cells, not {self.rows}x{self.cols}")
        object.__setattr__(self, "step", _neighbour_table(self.rows, self.cols, self.walls))
        cells = [
            WALL if self.walls[i] else TARGET if i in self.targets else FLOOR for i in range(len(self.walls))
        ]
        lines = ("".join(cells[r * self.cols : (r + 1) * self.cols]) for r in range(self.rows))
        object.__setattr__(self, "static_text", "\n".join(lines))

    def is_floor(self, cell: int) -> bool:
        """Whether ``cell`` is inside the grid and not a wall."""
        return 0 <= cell < len(self.walls) and not self.walls[cell]

    def floor_cells(self) -> list[int]:
        """Every non-wall cell, in index order."""
        return [i for i, w in enumerate(self.walls) if not w]


def _neighbour_table(rows: int, cols: int, walls: bytes) -> tuple[tuple[int, ...], ...]:
    table = []
    for dr, dc in DELTAS:
        row = []
        for cell in range(rows * cols):
            r, c = divmod(cell, cols)
            nr, nc = r + dr, c + dc
            ok = 0 <= nr < rows and 0 <= nc < cols and not walls[nr * cols + nc]
            row.append(nr * cols + nc if ok else -1)
        table.append(tuple(row))
    return tuple(table)


class State(NamedTuple):
    """The moving part of a level: the player's cell and the (sorted) box cells."""

    player: int
    boxes: tuple[int, ...]


class MoveResult(NamedTuple):
    """What one move did: the new state, whether the player moved, and whether it pushed a box."""

    state: State
    moved: bool
    pushed: bool


def apply_move(layout: Layout, state: State, direction: int) -> MoveResult:
    """Move the player one cell in ``direction`` (index into ``MOVES``), pushing at most one box."""
    step = layout.step[direction]
    nxt = step[state.player]
    if nxt < 0:
        return MoveResult(state, False, False)
    boxes = state.boxes
    if nxt not in boxes:
        return MoveResult(State(nxt, boxes), True, False)
    beyond = step[nxt]
    if beyond < 0 or beyond in boxes:
        return MoveResult(state, False, False)
    moved = tuple(sorted(beyond if b == nxt else b for b in boxes))
    return MoveResult(State(nxt, moved), True, True)


def boxes_on_target(layout: Layout, state: State) -> int:
    """How many boxes stand on targets."""
    return sum(1 for b in state.boxes if b in layout.targets)


def is_solved(layout: Layout, state: State) -> bool:
    """Every box is on a target."""
    return all(b in layout.targets for b in state.boxes)


def replay(layout: Layout, state: State, moves: str) -> State:
    """The state after playing ``moves`` (letters from ``MOVES``) from ``state``."""
    for letter in moves:
        state = apply_move(layout, state, MOVES.index(letter)).state
    return state


def _check(layout: Layout, state: State) -> None:
    if not layout.is_floor(state.player):
        raise LevelError("the player stands on a wall or outside the grid")
    if len(set(state.boxes)) != len(state.boxes) or not all(layout.is_floor(b) for b in state.boxes):
        raise LevelError("boxes must stand on distinct floor cells")
    if state.player in state.boxes:
        raise LevelError("the player stands on a box")
    if not state.boxes:
        raise LevelError("a level needs at least one box")
    if len(state.boxes) != len(layout.targets):
        raise LevelError(f"{len(state.boxes)} box(es) but {len(layout.targets)} target(s)")


def parse_level(text: str) -> tuple[Layout, State]:
    """A level from Boxoban-style ASCII; short lines are padded with floor, blank edge lines dropped."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise LevelError("empty level")
    rows, cols = len(lines), max(len(line) for line in lines)
    walls = bytearray(rows * cols)
    targets, boxes, players = set(), [], []
    for r, line in enumerate(lines):
        for c, ch in enumerate(line.ljust(cols)):
            cell = r * cols + c
            if ch == WALL:
                walls[cell] = 1
            elif ch in (TARGET, BOX_ON_TARGET, PLAYER_ON_TARGET):
                targets.add(cell)
            elif ch not in (FLOOR, BOX, PLAYER, "-", "_"):
                raise LevelError(f"unknown symbol {ch!r} at row {r}, column {c}")
            if ch in (BOX, BOX_ON_TARGET):
                boxes.append(cell)
            elif ch in (PLAYER, PLAYER_ON_TARGET):
                players.append(cell)
    if len(players) != 1:
        raise LevelError(f"a level needs exactly one player, found {len(players)}")
    layout = Layout(rows, cols, bytes(walls), frozenset(targets))
    state = State(players[0], tuple(sorted(boxes)))
    _check(layout, state)
    return layout, state


def to_ascii(layout: Layout, state: State) -> str:
    """The ASCII view of a state (one line per grid row, Boxoban symbols)."""
    chars = list(layout.static_text)
    cols, targets = layout.cols, layout.targets
    for b in state.boxes:
        chars[b + b // cols] = BOX_ON_TARGET if b in targets else BOX
    p = state.player
    chars[p + p // cols] = PLAYER_ON_TARGET if p in targets else PLAYER
    return "".join(chars)


def from_slime_grid(
    base_grid: Sequence[Sequence[int]], boxes: Sequence[Sequence[int]], player: Sequence[int]
) -> tuple[Layout, State]:
    """A level from the slime example's ``initial_base_grid`` / ``initial_boxes`` / ``initial_player``."""
    rows = len(base_grid)
    cols = len(base_grid[0]) if rows else 0
    if not rows or not cols or any(len(row) != cols for row in base_grid):
        raise LevelError("initial_base_grid must be a non-empty rectangle of rows")
    codes = [int(v) for row in base_grid for v in row]
    if any(v not in (SLIME_WALL, SLIME_FLOOR, SLIME_TARGET) for v in codes):
        raise LevelError("initial_base_grid holds codes other than 0 (wall), 1 (floor), 2 (target)")

    def cell(pos: Sequence[int]) -> int:
        r, c = (int(v) for v in pos)
        if not (0 <= r < rows and 0 <= c < cols):
            raise LevelError(f"position {[r, c]} lies outside the {rows}x{cols} grid")
        return r * cols + c

    layout = Layout(
        rows,
        cols,
        bytes(1 if v == SLIME_WALL else 0 for v in codes),
        frozenset(i for i, v in enumerate(codes) if v == SLIME_TARGET),
    )
    state = State(cell(player), tuple(sorted(cell(b) for b in boxes)))
    _check(layout, state)
    return layout, state


def to_slime_grid(layout: Layout, state: State) -> dict[str, list]:
    """The slime example's ``initial_base_grid`` / ``initial_boxes`` / ``initial_player`` keys."""
    grid = [
        [
            SLIME_WALL
            if layout.walls[r * layout.cols + c]
            else SLIME_TARGET
            if r * layout.cols + c in layout.targets
            else SLIME_FLOOR
            for c in range(layout.cols)
        ]
        for r in range(layout.rows)
    ]
    return {
        "initial_base_grid": grid,
        "initial_boxes": [list(divmod(b, layout.cols)) for b in state.boxes],
        "initial_player": list(divmod(state.player, layout.cols)),
    }
