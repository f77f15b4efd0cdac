"""Level generator: rooms carved by a random walk, boxes pulled backwards from a solved state.

Every level is solvable by construction: it is reached from a solved state by reverse play (the
player walks and pulls boxes), so reversing that play solves it. Difficulty is chosen: each attempt
picks, among the states of its reverse walk with no box on a target, the hardest one whose bounds fit
``min_moves``/``max_moves``, then the A* solver measures its exact optimal length within a node
budget (never a time budget, so results do not depend on the machine). When the budget runs out,
the shorter of the reversed play (replay-verified) and a weighted-A* solution is kept as an upper
bound and the level is recorded as not exact.
Attempt ``a`` of seed ``s`` draws from ``numpy.random.default_rng([s mod 2**64, a])``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vlm_envs.envs.sokoban.board import MOVES, Layout, State, is_solved, replay
from vlm_envs.envs.sokoban.solver import Solver, SolveResult

_OPPOSITE = (1, 0, 3, 2)
_TURN_PROBABILITY = 0.35
_PULL_PROBABILITY = 0.8
#: Heuristic weight of the search that tightens the bound of levels too big to solve exactly.
_BOUND_WEIGHT = 3.0
#: The most cells a generated grid has a side (border wall included): levels people solve stay near
#: 20, and a grid's memory and generation time grow with its area.
MAX_GRID_SIDE = 64
#: The most boxes a generated level holds: Boxoban's levels have 4 (the two bounds below allow 4 boxes on
#: 16 to 19 floor cells only).
MAX_BOXES = 4
#: The most box placements a generated level may have: its floor cells to the power of its boxes. Measured
#: on 2 shared cores with the default solver budget (6 seeds per board): up to this, levels generate
#: within about a second and the solver solves them exactly (3 boxes on 10x10 with 20% walls, 51 floor
#: cells: 1.1 s; 2 boxes on an open 20x20, 324 cells: 0.3 s; 1 box on an open 64x64: 0.4 s); past it, not
#: (3 boxes on an open 10x10, 64 cells: 3.2 s; 2 boxes on an open 24x24: 4.5 s; 3 boxes on 16x16: up to
#: 26 s, half the levels beyond the solver, 286 moves long). The old bounds let 12 boxes on 30x30 through:
#: levels the oracle's solver could not solve.
MAX_BOX_PLACEMENTS = 150_000
#: The fewest floor cells a box needs: a room more cramped fails to pull its boxes off their targets (3
#: boxes on 7 floor cells of a 5x5: 1 seed in 6 made no level; on 10 cells of a 12x12: 1 in 6).
FLOOR_PER_BOX = 4
#: The most work one level may cost, in units of about a microsecond: a solver node costs its walk over the
#: board (one unit a cell) and its pushes (50 units per box squared), a step of an attempt's reverse walk
#: one unit per box. The levels people play cost far less (10x10 boards: 1.5M with 3 boxes, 10M with 4);
#: unbounded, a 64x64 board with 10 boxes took 4 minutes.
MAX_SEARCH_WORK = 10_000_000


def node_cost(rows: int, cols: int, boxes: int) -> int:
    """Work units of one solver node on a ``rows`` x ``cols`` board with ``boxes`` boxes."""
    return rows * cols + 50 * boxes * boxes


@dataclasses.dataclass(frozen=True)
class Difficulty:
    """What to generate: grid (rows, cols) incl. the border wall, boxes, walls, optimal-length range."""

    rows: int = 6
    cols: int = 6
    num_boxes: int = 1
    wall_fraction: float = 0.2
    min_moves: int | None = None
    max_moves: int | None = None
    solver_max_nodes: int = 20_000
    max_attempts: int = 200

    def __post_init__(self) -> None:
        if max(self.rows, self.cols) > MAX_GRID_SIDE:
            raise ValueError(f"a grid has at most {MAX_GRID_SIDE} cells a side, got {self.rows}x{self.cols}")
        if self.num_boxes > MAX_BOXES:
            raise ValueError(f"a generated level has at most {MAX_BOXES} boxes, got {self.num_boxes}")
        interior = (self.rows - 2) * (self.cols - 2)
        if self.rows < 3 or self.cols < 3 or interior < self.num_boxes + 2 or self.num_boxes < 1:
            raise ValueError(
                f"a {self.rows}x{self.cols} grid has {max(interior, 0)} interior cells: too few for "
                f"{self.num_boxes} box(es), a free target and the player"
            )
        if not 0.0 <= self.wall_fraction < 1.0:
            raise ValueError(f"wall_fraction must lie in [0, 1), got {self.wall_fraction}")
        floor = self.floor_cells
        if floor < FLOOR_PER_BOX * self.num_boxes:
            raise ValueError(
                f"a {self.rows}x{self.cols} room with wall_fraction {self.wall_fraction:g} has {floor} floor "
                f"cells; {self.num_boxes} box(es) need at least {FLOOR_PER_BOX * self.num_boxes}: lower "
                "wall_fraction or num_boxes, or raise the grid"
            )
        if floor**self.num_boxes > MAX_BOX_PLACEMENTS:
            most = int(MAX_BOX_PLACEMENTS ** (1 / self.num_boxes) + 1e-9)
            raise ValueError(
                f"a {self.rows}x{self.cols} room with wall_fraction {self.wall_fraction:g} has {floor} floor "
                f"cells; {self.num_boxes} box(es) allow at most {most} (beyond, levels take seconds to make "
                "and outgrow the solver): lower the grid or num_boxes, or raise wall_fraction"
            )
        if self.min_moves is not None and self.max_moves is not None and self.min_moves > self.max_moves:
            raise ValueError(f"min_moves {self.min_moves} exceeds max_moves {self.max_moves}")

    @property
    def floor_cells(self) -> int:
        """The floor cells a room is carved to: the interior less ``wall_fraction`` of it, at least one
        per box, a free target and the player."""
        interior = (self.rows - 2) * (self.cols - 2)
        return max(self.num_boxes + 2, round((1.0 - self.wall_fraction) * interior))


@dataclasses.dataclass(frozen=True)
class GeneratedLevel:
    """A generated level, its optimal length (exact or an upper bound) and a solution of that length."""

    layout: Layout
    state: State
    optimal_moves: int
    optimal_exact: bool
    solution: str
    seed: int
    attempt: int


class GenerationError(ValueError):
    """No level met the difficulty within ``max_attempts`` and the search budget: the difficulty asked
    for cannot be met (a config error)."""


@dataclasses.dataclass
class _Budget:
    """Work units left for one level (:data:`MAX_SEARCH_WORK`); ``node`` is what a solver node costs."""

    units: int
    node: int

    def charge(self, units: int) -> None:
        self.units -= units

    def solve(self, solver: Solver, start: State, max_nodes: int, weight: float = 1.0) -> SolveResult:
        result = solver.solve(start, max_nodes=min(max_nodes, max(self.units // self.node, 0)), weight=weight)
        self.charge(result.nodes * self.node)
        return result


def carve_room(spec: Difficulty, rng: np.random.Generator) -> bytes:
    """Walls of a connected room: a random walk carves floor until the wall fraction is reached."""
    rows, cols = spec.rows, spec.cols
    walls = bytearray(b"\x01" * (rows * cols))
    interior = (rows - 2) * (cols - 2)
    want = spec.floor_cells
    r, c = int(rng.integers(1, rows - 1)), int(rng.integers(1, cols - 1))
    walls[r * cols + c] = 0
    carved = 1
    budget = 60 * interior
    turns = rng.random(budget) < _TURN_PROBABILITY
    dirs = rng.integers(0, 4, budget)
    direction = int(dirs[0])
    for i in range(budget):
        if carved >= want:
            break
        if turns[i]:
            direction = int(dirs[i])
        dr, dc = ((-1, 0), (1, 0), (0, -1), (0, 1))[direction]
        if 1 <= r + dr < rows - 1 and 1 <= c + dc < cols - 1:
            r, c = r + dr, c + dc
            if walls[r * cols + c]:
                walls[r * cols + c] = 0
                carved += 1
    return bytes(walls)


def _reverse_walk(
    layout: Layout, solved: State, steps: int, rng: np.random.Generator
) -> list[tuple[State, str]]:
    """States after each pull of a reverse walk from ``solved``, each with a forward solution (a pull
    undoes a push); loops are cut, so the solution never passes the same state twice."""
    step = layout.step
    player, boxes = solved.player, set(solved.boxes)
    trail = [solved]  # states of the walk, loops removed
    letters: list[str] = []  # forward moves: letters[i] leads from trail[i + 1] to trail[i]
    index = {solved: 0}
    out = []
    dirs = rng.integers(0, 4, steps)
    pulls = rng.random(steps) < _PULL_PROBABILITY
    for i in range(steps):
        d = int(dirs[i])
        dest = step[d][player]
        if dest < 0 or dest in boxes:
            continue
        box = step[_OPPOSITE[d]][player]
        pulled = pulls[i] and box >= 0 and box in boxes
        if pulled:
            boxes.discard(box)
            boxes.add(player)
        player = dest
        state = State(player, tuple(sorted(boxes)))
        if state in index:  # back on the trail: cut the loop
            for dropped in trail[index[state] + 1 :]:
                del index[dropped]
            del trail[index[state] + 1 :], letters[index[state] :]
        else:
            index[state] = len(trail)
            trail.append(state)
            letters.append(MOVES[_OPPOSITE[d]])
        if pulled:
            out.append((state, "".join(reversed(letters))))
    return out


def _pick(
    spec: Difficulty, solver: Solver, layout: Layout, walk: list[tuple[State, str]]
) -> tuple[State, str] | None:
    """The walk state with the highest lower bound whose bounds fit the move range, no box on target."""
    best, best_key = None, None
    for state, solution in walk:
        if any(b in layout.targets for b in state.boxes):
            continue
        lower = solver.lower_bound(state)
        if spec.max_moves is not None and lower > spec.max_moves:
            continue
        if spec.min_moves is not None and len(solution) < spec.min_moves:
            continue
        key = (lower, -len(solution))
        if best_key is None or key > best_key:
            best, best_key = (state, solution), key
    return best


def _in_range(spec: Difficulty, moves: int) -> bool:
    return (spec.min_moves is None or moves >= spec.min_moves) and (
        spec.max_moves is None or moves <= spec.max_moves
    )


def _attempt(spec: Difficulty, seed: int, attempt: int, budget: _Budget) -> GeneratedLevel | None:
    rng = np.random.default_rng([seed % (1 << 64), attempt])
    walls = carve_room(spec, rng)
    floor = [i for i, w in enumerate(walls) if not w]
    chosen = rng.choice(len(floor), size=spec.num_boxes + 1, replace=False)
    targets = tuple(sorted(floor[int(i)] for i in chosen[:-1]))
    layout = Layout(spec.rows, spec.cols, walls, frozenset(targets))
    solver = Solver(layout)
    steps = 4 * len(floor) * spec.num_boxes + (3 * spec.max_moves if spec.max_moves else 0)
    budget.charge(steps * spec.num_boxes)
    picked = _pick(
        spec, solver, layout, _reverse_walk(layout, State(floor[int(chosen[-1])], targets), steps, rng)
    )
    if picked is None:
        return None
    state, bound = picked
    # Start the player anywhere in its region (it can walk back), not necessarily next to a box.
    region = sorted(solver.walk(state.player, sum(1 << b for b in state.boxes)))
    start = State(region[int(rng.integers(0, len(region)))], state.boxes)
    bound = solver.walk_path(start.player, state.player, sum(1 << b for b in state.boxes)) + bound
    result = budget.solve(solver, start, spec.solver_max_nodes)
    if result.moves is not None:
        solution, exact = result.moves, True
    elif not result.complete and is_solved(layout, replay(layout, start, bound)):
        # Too big to search exactly: keep the shorter of the reversed play and a weighted-A* solution.
        greedy = budget.solve(solver, start, spec.solver_max_nodes, weight=_BOUND_WEIGHT).moves
        solution, exact = min(bound, greedy or bound, key=len), False
    else:
        return None
    if not _in_range(spec, len(solution)):
        return None
    return GeneratedLevel(layout, start, len(solution), exact, solution, seed, attempt)


def generate_level(spec: Difficulty, seed: int) -> GeneratedLevel:
    """The level for ``seed``: the first attempt (0, 1, ...) that meets ``spec`` within the search budget
    (:data:`MAX_SEARCH_WORK`); same seed, same level."""
    budget = _Budget(MAX_SEARCH_WORK, node_cost(spec.rows, spec.cols, spec.num_boxes))
    for attempt in range(spec.max_attempts):
        level = _attempt(spec, seed, attempt, budget)
        if level is not None:
            return level
        if budget.units <= 0:
            break
    raise GenerationError(
        f"no {spec.rows}x{spec.cols} level with {spec.num_boxes} box(es) and optimal length in "
        f"[{spec.min_moves}, {spec.max_moves}] after {attempt + 1} attempts (seed {seed}); "
        "widen the move range, change wall_fraction, or lower num_boxes or the grid"
    )
