"""TransitMap's network: lines through named stops on a lattice, drawn from a seed, and the fewest rides.

Stops stand on the points of a ``cols x rows`` lattice. A line is a simple path of lattice points, each step
one of the eight octilinear neighbours, and stops at every point it passes; where two lines pass one point
they both stop there (an interchange). Two lines never share a step, so their drawn segments only meet at
stops or cross at the middle of a lattice square (two diagonals: a crossing without a stop). Each line after
the first grows both ways from a stop of a line drawn before it, so every stop reaches every other.

A ride takes one line from one of its stops to any other of its stops, so the fewest rides between two stops
depend only on the lines serving them: 1 where a line serves both, else one more than the fewest changes
between a line of the one and a line of the other (a breadth-first search over the lines).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections import deque

import numpy as np

from vlm_envs.envs.transit_map.names import stop_names

Point = tuple[int, int]
#: The eight octilinear steps (column, row), counter-clockwise from east (rows grow downwards).
STEPS: tuple[Point, ...] = ((1, 0), (1, -1), (0, -1), (-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1))
#: (name, RGB) of the line colours, distinct on the map's light ground; black stays for the markers.
COLORS: tuple[tuple[str, tuple[int, int, int]], ...] = (
    ("Red", (214, 39, 40)),
    ("Blue", (31, 90, 180)),
    ("Green", (30, 140, 60)),
    ("Orange", (245, 140, 10)),
    ("Purple", (128, 60, 170)),
    ("Brown", (140, 86, 45)),
    ("Pink", (230, 100, 180)),
    ("Teal", (0, 150, 155)),
)
#: Networks drawn per reset before the one with the farthest trip is taken (``min_rides`` not met).
MAX_DRAWS = 60
#: Tries to grow one line (another anchor stop, another direction) before the network is drawn again.
LINE_TRIES = 24
#: Relative weights of going straight on and of a 45-degree bend either way at each step.
STRAIGHT, BEND = 6.0, 2.0
#: The weight of a step onto a stop another line already has (making an interchange), relative to a free one.
ONTO_STOP = 0.4


@dataclasses.dataclass(frozen=True)
class Line:
    """One line: its name as answers use it, its colour, and its stops (indices) in order."""

    name: str
    color_name: str
    color: tuple[int, int, int]
    stops: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Network:
    """Stops (a name and a lattice point each) and the lines through them."""

    grid: tuple[int, int]
    names: tuple[str, ...]
    points: tuple[Point, ...]
    lines: tuple[Line, ...]

    @functools.cached_property
    def serving(self) -> tuple[tuple[int, ...], ...]:
        """Per stop, the lines (indices) that stop there."""
        serving: list[list[int]] = [[] for _ in self.names]
        for index, line in enumerate(self.lines):
            for stop in line.stops:
                serving[stop].append(index)
        return tuple(tuple(lines) for lines in serving)

    def rides_to(self, destination: int) -> tuple[int, ...]:
        """Per stop, the fewest rides to ``destination`` (0 there, -1 where no ride leads there: never in a
        drawn network, which is connected)."""
        changes = line_changes(self.lines, self.serving)
        goal_lines = self.serving[destination]
        out = []
        for stop, lines in enumerate(self.serving):
            ways = [changes[a][b] for a in lines for b in goal_lines if changes[a][b] >= 0]
            out.append(0 if stop == destination else 1 + min(ways) if ways else -1)
        return tuple(out)


def line_changes(lines: tuple[Line, ...], serving: tuple[tuple[int, ...], ...]) -> list[list[int]]:
    """The fewest changes between every two lines (0 to itself, 1 where they share a stop, -1 where none
    leads from one to the other)."""
    n = len(lines)
    meets: list[set[int]] = [set() for _ in range(n)]
    for here in serving:
        for a, b in itertools.permutations(here, 2):
            meets[a].add(b)
    table = []
    for first in range(n):
        dist = [-1] * n
        dist[first] = 0
        queue = deque([first])
        while queue:
            at = queue.popleft()
            for nxt in sorted(meets[at]):
                if dist[nxt] < 0:
                    dist[nxt] = dist[at] + 1
                    queue.append(nxt)
        table.append(dist)
    return table


@dataclasses.dataclass(frozen=True)
class Trip:
    """One episode's network, start and destination, and the fewest rides between them."""

    network: Network
    start: int
    destination: int
    fewest_rides: int


@dataclasses.dataclass
class _Lattice:
    """The lattice while lines are drawn: points taken by some line, and every step drawn."""

    cols: int
    rows: int
    taken: set[Point] = dataclasses.field(default_factory=set)
    steps: set[frozenset[Point]] = dataclasses.field(default_factory=set)

    def free_step(self, at: Point, to: Point, own: set[Point], new_steps: set[frozenset[Point]]) -> bool:
        """Whether a line (its points so far ``own``, its steps so far ``new_steps``) may step from ``at`` to
        ``to``: inside the lattice, not back onto itself, not along a step any line has, not across a
        diagonal of its own (crossing another line's is a crossing without a stop)."""
        if not (0 <= to[0] < self.cols and 0 <= to[1] < self.rows) or to in own:
            return False
        step = frozenset((at, to))
        if step in self.steps or step in new_steps:
            return False
        return (
            at[0] == to[0] or at[1] == to[1] or frozenset(((to[0], at[1]), (at[0], to[1]))) not in new_steps
        )


def _grow(
    lattice: _Lattice, start: Point, heading: int, length: int, own: set[Point],
    new_steps: set[frozenset[Point]], rng: np.random.Generator,
) -> list[Point]:  # fmt: skip
    """Up to ``length`` points walked from ``start`` (not included), first roughly along ``heading``."""
    walked: list[Point] = []
    at = start
    for _ in range(length):
        options: list[tuple[int, Point]] = []
        weights: list[float] = []
        for turn, weight in ((0, STRAIGHT), (1, BEND), (-1, BEND)):
            direction = (heading + turn) % 8
            to = (at[0] + STEPS[direction][0], at[1] + STEPS[direction][1])
            if lattice.free_step(at, to, own, new_steps):
                options.append((direction, to))
                weights.append(weight * (ONTO_STOP if to in lattice.taken else 1.0))
        if not options:
            break
        p = np.asarray(weights) / sum(weights)
        heading, to = options[int(rng.choice(len(options), p=p))]
        new_steps.add(frozenset((at, to)))
        own.add(to)
        walked.append(to)
        at = to
    return walked


def _line_through(
    lattice: _Lattice, anchor: Point, stops: tuple[int, int], rng: np.random.Generator
) -> tuple[list[Point], set[frozenset[Point]]]:
    """A line through ``anchor`` of up to ``stops[1]`` points (its length drawn from ``stops``), grown both
    ways from it, and its steps; not yet drawn into the lattice."""
    total = int(rng.integers(stops[0], stops[1] + 1))
    ahead = int(rng.integers(1, total)) if total > 1 else 0
    heading = int(rng.integers(8))
    own: set[Point] = {anchor}
    new_steps: set[frozenset[Point]] = set()
    forward = _grow(lattice, anchor, heading, ahead, own, new_steps, rng)
    backward = _grow(lattice, anchor, (heading + 4) % 8, total - 1 - len(forward), own, new_steps, rng)
    return [*reversed(backward), anchor, *forward], new_steps


def _anchors(paths: list[list[Point]], chain: bool, rng: np.random.Generator) -> list[Point]:
    """Points a new line may grow from, in the order tried: stops of the line drawn last (``chain``) or of
    any line, those no other line serves first."""
    pool = paths[-1] if chain else [p for path in paths for p in path]
    counts = {p: sum(p in path for path in paths) for p in pool}
    order = [pool[int(i)] for i in rng.permutation(len(pool))]
    return sorted(dict.fromkeys(order), key=lambda p: counts[p] > 1)


def _draw_paths(
    grid: tuple[int, int], lines: int, stops: tuple[int, int], chain: int, rng: np.random.Generator
) -> list[list[Point]] | None:
    """Every line's points, or ``None`` where one could not be grown two stops long. A line that cannot reach
    ``stops[0]`` within :data:`LINE_TRIES` tries keeps its longest try. The first ``chain`` lines each grow
    from the one before (a chain of changes: far trips exist), the others from any line."""
    lattice = _Lattice(*grid)
    first = (int(rng.integers(grid[0])), int(rng.integers(grid[1])))
    paths: list[list[Point]] = []
    for index in range(lines):
        anchors = [first] if index == 0 else _anchors(paths, index < chain, rng)
        longest: tuple[list[Point], set[frozenset[Point]]] = ([], set())
        for anchor in itertools.islice(itertools.cycle(anchors), LINE_TRIES):
            path, steps = _line_through(lattice, anchor, stops, rng)
            if len(path) > len(longest[0]):
                longest = (path, steps)
            if len(path) >= stops[0]:
                break
        if len(longest[0]) < 2:
            return None
        lattice.taken.update(longest[0])
        lattice.steps.update(longest[1])
        paths.append(longest[0])
    return paths


def _network(
    grid: tuple[int, int], paths: list[list[Point]], numbered: bool, rng: np.random.Generator
) -> Network:
    """The network of ``paths``: stops named, lines coloured and named (by colour, or ``1``.. in a drawn
    order when ``numbered``), listed by name."""
    points = list(dict.fromkeys(p for path in paths for p in path))
    index = {p: i for i, p in enumerate(points)}
    palette = [int(i) for i in rng.choice(len(COLORS), size=len(paths), replace=False)]
    numbers = [int(n) + 1 for n in rng.permutation(len(paths))]
    names = [str(n) for n in numbers] if numbered else [COLORS[i][0] for i in palette]
    taken = frozenset(name for name, _ in COLORS) | frozenset(names)
    drawn = sorted(
        zip(numbers if numbered else palette, names, palette, paths, strict=True), key=lambda row: row[0]
    )
    lines = tuple(Line(name, *COLORS[color], tuple(index[p] for p in path)) for _, name, color, path in drawn)
    return Network(grid, tuple(stop_names(len(points), rng, taken)), tuple(points), lines)


def _farthest(network: Network, min_rides: int, rng: np.random.Generator) -> Trip:
    """A trip drawn among the stop pairs at least ``min_rides`` apart, else among the farthest apart."""
    serving = network.serving
    changes = line_changes(network.lines, serving)
    groups: dict[tuple[int, ...], list[int]] = {}
    for stop, lines in enumerate(serving):
        groups.setdefault(lines, []).append(stop)
    apart: dict[tuple[int, int], int] = {}
    for (lines_a, stops_a), (lines_b, stops_b) in itertools.product(groups.items(), repeat=2):
        rides = 1 + min(changes[a][b] for a in lines_a for b in lines_b)
        for a in stops_a:
            for b in stops_b:
                if a != b:
                    apart[a, b] = rides
    longest = max(apart.values())
    floor = min(min_rides, longest)
    pairs = sorted(pair for pair, rides in apart.items() if rides >= floor)
    start, destination = pairs[int(rng.integers(len(pairs)))]
    return Trip(network, start, destination, apart[start, destination])


def draw_trip(
    grid: tuple[int, int], lines: int, stops: tuple[int, int], min_rides: int, numbered: bool, seed: int
) -> Trip:
    """A network and a trip drawn from ``seed``: ``lines`` lines of ``stops[0]`` to ``stops[1]`` stops on a
    ``grid`` (cols, rows) lattice, and a start and destination at least ``min_rides`` rides apart. Networks
    are drawn again (at most :data:`MAX_DRAWS`) while no trip is that far; then the farthest trip found is
    taken."""
    rng = np.random.default_rng([seed, 0x7A251])
    best: Trip | None = None
    for _ in range(MAX_DRAWS):
        paths = _draw_paths(grid, lines, stops, min(min_rides, lines), rng)
        if paths is None:
            continue
        trip = _farthest(_network(grid, paths, numbered, rng), min_rides, rng)
        if trip.fewest_rides >= min_rides:
            return trip
        if best is None or trip.fewest_rides > best.fewest_rides:
            best = trip
    if best is None:
        raise ValueError(f"no network of {lines} lines fits a {grid[0]}x{grid[1]} lattice")
    return best
