"""Per-env checks that an oracle rationale states true facts: each reads the env's own state (and its
rules), parses the facts the rationale names, and asserts they hold. ``TRUTH[name](env, reason, reply)``."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from vlm_envs.envs.chart_calc.calc import evaluate
from vlm_envs.envs.fog_maze.maze import can_move
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.envs.image_probe import COLORS
from vlm_envs.envs.jigsaw.board import swap
from vlm_envs.envs.matchstick.equation import SEGMENTS
from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, TURNS, key, mirrored, oriented, turn
from vlm_envs.envs.rush_hour.board import grid

Check = Callable[[Any, str, str], None]
_MOVES = r"\b(Up|Down|Left|Right)\b"


def _answer(reply: str) -> str:
    match = re.search(r"<answer>(.*?)</answer>", reply)
    assert match, reply
    return match.group(1)


def sokoban(env: Any, reason: str, reply: str) -> None:
    layout, state = env.layout, env.state

    def cell(row: str, col: str) -> int:
        return int(row) * layout.cols + int(col)

    player = re.match(r"I am at \((\d+), (\d+)\)", reason)
    assert player and cell(*player.groups()) == state.player, reason
    boxes = re.search(r"The box(?:es)? at (.*?) (?:is|are) off target", reason)
    assert boxes, reason
    named = {cell(*p) for p in re.findall(r"\((\d+), (\d+)\)", boxes.group(1))}
    assert named == {b for b in state.boxes if b not in layout.targets}, reason
    plan = re.search(r"Next: (.*?)\.(?: |$)", reason)
    assert plan, reason
    assert re.findall(_MOVES, plan.group(1)) == re.findall(_MOVES, _answer(reply)), reason
    first_push = re.search(r"push the box at \((\d+), (\d+)\)", plan.group(1))
    if first_push:  # the first box pushed is there now
        assert cell(*first_push.groups()) in state.boxes, reason
    for row, col in re.findall(r"to \((\d+), (\d+)\), onto a target", reason):
        assert cell(row, col) in layout.targets, reason


def _number(answer: str) -> Fraction | None:
    """A geo3k answer as an exact number where it is one (``12``, ``7.5``, ``\\frac{5}{2}``)."""
    frac = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", answer)
    if frac:
        return Fraction(int(frac.group(2)), int(frac.group(3))) * (-1 if frac.group(1) else 1)
    return Fraction(answer) if re.fullmatch(r"-?\d+(\.\d+)?", answer) else None


def geo3k(env: Any, reason: str, reply: str) -> None:
    problem = env.problem
    assert problem.solution and reason.startswith(problem.solution), reason
    assert f"So the answer is {problem.answer}" in reason, reason
    assert ("<tool_call>" in reply) == ("I check it with calc_score" in reason), (reason, reply)
    for a, sign, b, total in re.findall(r"x² = (\d+)² ([+-]) (\d+)² = (\d+)", reason):
        assert int(a) ** 2 + (1 if sign == "+" else -1) * int(b) ** 2 == int(total), reason
        surd = re.fullmatch(r"(\d*)\\sqrt\{(\d+)\}", problem.answer)
        k, m = (int(surd.group(1) or 1), int(surd.group(2))) if surd else (int(problem.answer), 1)
        assert k * k * m == int(total), reason
    tail = re.search(r"(?:x = |: )([\d\s·/+\-()]+)\.$", problem.solution)
    value = _number(problem.answer)
    if tail and value is not None:  # the worked arithmetic gives the answer (at the asked rounding)
        assert abs(evaluate(tail.group(1).replace("·", "*")) - float(value)) < 0.051, reason


def zoom_search(env: Any, reason: str, reply: str) -> None:
    target = env._ep.scene.target_object
    assert f"the {target.color} {target.shape}" in reason, reason
    if "<tool_call>" not in reply:
        assert reason.endswith(f"{target.code}.") and f"\\boxed{{{target.code}}}" in reply, reason
        return
    box = re.search(r"inside \[([\d, ]+)\]", reason)
    assert box, reason
    named = [int(v) for v in box.group(1).split(", ")]
    call = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])
    assert named == call["arguments"]["bbox"], reason
    limit = 1000 if env.config.coords == "relative1000" else env.config.view
    factor = limit / env.config.canvas
    x0, y0, x1, y1 = (v * factor for v in target.box)
    assert named[0] <= x0 and named[1] <= y0 and named[2] >= x1 and named[3] >= y1, reason


def chart_calc(env: Any, reason: str, reply: str) -> None:
    table, question = env._ep.table, env._ep.question
    assert ("<tool_call>" in reply) == ("with calc" in reason), (reason, reply)
    if question.kind == "which" and len(table.series) > 1:
        first, second = re.search(r"its (\d{4}) value minus its (\d{4}) value", reason).groups()
        s, t = table.series.index(first), table.series.index(second)
        pairs = re.findall(r"([A-Z][a-z]+) (\d+) - (\d+)", reason)
        assert len(pairs) == len(table.categories), reason
        for category, a, b in pairs:
            c = table.categories.index(category)
            assert (table.values[s][c], table.values[t][c]) == (int(a), int(b)), reason
        return
    names = {
        f"{category}{f' in {series}' if series else ''}": (s, c)
        for s, series in enumerate(table.series)
        for c, category in enumerate(table.categories)
    }
    pairs = re.findall(r"([A-Z][a-z]+(?: in \d{4})?) = (\d+)", reason)
    assert [names[name] for name, _ in pairs] == list(question.reads), reason
    for name, value in pairs:
        s, c = names[name]
        assert table.values[s][c] == int(value), reason
    if "<tool_call>" not in reply:
        assert question.answer in reason, reason


def fog_maze(env: Any, reason: str, reply: str) -> None:
    ep, cfg = env._ep, env.config
    walls, cell = ep.maze.walls, ep.cell
    path = shortest_actions(walls, cell, ep.heading, ep.maze.goal, cfg.view)
    names = {"local": ("Up", "Right", "Down", "Left"), "first_person": ("Forward", "TurnLeft", "TurnRight")}
    way = re.search(r"A shortest path to the goal (?:is|starts) (.*)\.$", reason)
    assert way, reason
    named = way.group(1).split(", ")
    assert named == [names[cfg.view][a] for a in path[: len(named)]] == _answer(reply).split(", "), reason
    if cfg.view == "first_person":
        assert reason.startswith(f"I face {('north', 'east', 'south', 'west')[ep.heading]}"), reason
        assert ("wall right in front of me" in reason) == (not can_move(walls, cell, ep.heading)), reason
        return
    opened = re.search(r"the way is open (.*?)[;.]", reason)
    assert opened, reason
    assert set(re.findall(_MOVES, opened.group(1))) == {
        names["local"][d] for d in range(4) if can_move(walls, cell, d)
    }, reason
    rows, cols = ep.maze.goal[0] - cell[0], ep.maze.goal[1] - cell[1]
    in_view = max(abs(rows), abs(cols)) <= cfg.view_size // 2
    assert ("The goal is not in view" in reason) == (not in_view), reason
    for count, side in re.findall(r"(\d+) cells? (up|down|left|right)", reason):
        assert {"up": -rows, "down": rows, "left": -cols, "right": cols}[side] == int(count), reason


def jigsaw(env: Any, reason: str, reply: str) -> None:
    board = env._ep.board
    wrong = [p + 1 for p, tile in enumerate(board) if tile != p]
    count = re.match(r"(\d+) of the (\d+) tiles", reason)
    assert count and (int(count.group(1)), int(count.group(2))) == (len(wrong), len(board)), reason
    positions = re.search(r"at positions? ([\d, and]+)\.", reason)
    assert positions and [int(p) for p in re.findall(r"\d+", positions.group(1))] == wrong, reason
    swaps = re.findall(r"swap\((\d+),(\d+)\) puts tiles? ([\d, and]+) in place", reason)
    assert [f"swap({a},{b})" for a, b, _ in swaps] == _answer(reply).split(), reason
    for a, b, tiles in swaps:
        board = swap(board, int(a) - 1, int(b) - 1)
        assert all(board[int(t) - 1] == int(t) - 1 for t in re.findall(r"\d+", tiles)), reason


def mental_rotation(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    if env.config.mode == "rotate":
        assert f"shape of {len(ep.cubes)} cubes" in reason, reason
        turns = re.search(r"quarter turns? ((?:[xyz][+-] ?)+)", reason).group(1).split()
        assert _answer(reply).split() == turns[: len(_answer(reply).split())], reason
        orientation = ep.orientation
        for name in turns:
            orientation = turn(orientation, name)
        assert orientation in ep.goals, reason
        return
    first = next(r for r in range(len(ROTATIONS)) if env._view(r).tobytes() == ep.left.tobytes())
    shown = ep.cubes if ep.answer == "same" else mirrored(ep.cubes)
    right = key(oriented(shown, ep.orientation))
    turned = re.search(r"(?:by|turned by) ((?:[xyz][+-] ?)+)", reason)
    shape = oriented(ep.cubes, first)
    if ep.answer == "mirror":
        assert reason.endswith("so the right one is the mirror image."), reason
        assert all(key(oriented(ep.cubes, r)) != right for r in range(len(ROTATIONS))), reason
        shape = mirrored(shape)
    else:
        assert "the same shape" in reason, reason
    for name in turned.group(1).split() if turned else ():
        shape = shape @ TURNS[name].T
    assert key(shape) == right, reason


def sliding_puzzle(env: Any, reason: str, reply: str) -> None:
    board, n = env.board, env.config.n
    gap = board.index(0)
    head = re.match(
        r"The gap is at row (\d+), column (\d+); (\d+) of the (\d+) tiles (?:is|are) in place", reason
    )
    assert head, reason
    home = sum(t == p + 1 for p, t in enumerate(board) if t)
    assert tuple(map(int, head.groups())) == (gap // n + 1, gap % n + 1, home, n * n - 1), reason
    total = re.search(r"(A shortest|My) solution takes (\d+) more moves?", reason)
    manhattan = sum(abs(p // n - (t - 1) // n) + abs(p % n - (t - 1) % n) for p, t in enumerate(board) if t)
    assert total and int(total.group(2)) >= manhattan, reason  # no solution is shorter than that
    slides = re.findall(r"tile (\d+) (Up|Down|Left|Right)", reason)
    assert [d for _, d in slides] == _answer(reply).split(", "), reason
    steps = {"Up": (1, 0), "Down": (-1, 0), "Left": (0, 1), "Right": (0, -1)}  # where the slid tile stood
    cells = list(board)
    for tile, direction in slides:
        r, c = divmod(cells.index(0), n)
        at = (r + steps[direction][0]) * n + c + steps[direction][1]
        assert 0 <= r + steps[direction][0] < n and 0 <= c + steps[direction][1] < n, reason
        assert cells[at] == int(tile), reason
        cells[cells.index(0)], cells[at] = cells[at], 0


def _lake_distances(rows: tuple[str, ...], goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Moves from every tile to the goal over tiles that are not holes (BFS from the goal)."""
    n, dist = len(rows), {goal: 0}
    queue = [goal]
    for r, c in queue:
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < n and 0 <= nc < n and (nr, nc) not in dist and rows[nr][nc] != "H":
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


def frozen_lake(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    lake, cell = ep.lake, ep.cell
    names, steps = ("Left", "Down", "Right", "Up"), ((0, -1), (1, 0), (0, 1), (-1, 0))
    rows, cols = lake.goal[0] - cell[0], lake.goal[1] - cell[1]
    goal = re.match(r"The goal is (.*?) of me\.", reason)
    assert goal, reason
    sides = {side: int(n) for n, side in re.findall(r"(\d+) tiles? (up|down|left|right)", goal.group(1))}
    assert sides == {
        k: v for k, v in {"up": -rows, "down": rows, "left": -cols, "right": cols}.items() if v > 0
    }
    near = {
        names[d]
        for d, (dr, dc) in enumerate(steps)
        if 0 <= cell[0] + dr < lake.size
        and 0 <= cell[1] + dc < lake.size
        and lake.rows[cell[0] + dr][cell[1] + dc] == "H"
    }
    holes = re.search(r"Holes next to me: (.*?)\.", reason)
    assert set(re.findall(_MOVES, holes.group(1)) if holes else ()) == near, reason
    assert ("No hole is next to me." in reason) == (not near), reason
    dist = _lake_distances(lake.rows, lake.goal)
    total = re.search(r"A safe shortest path takes (\d+) moves?; next: (.*?)\.", reason)
    assert total and int(total.group(1)) == dist[cell], reason
    at = cell
    for name in total.group(2).split(", "):
        dr, dc = steps[names.index(name)]
        nxt = (at[0] + dr, at[1] + dc)
        assert dist.get(nxt) == dist[at] - 1, reason  # on the lake, no hole, one move nearer the goal
        at = nxt
    presses = re.search(r"to go (.*?) I press (.*?)\.$", reason)
    assert (presses is not None) == env.config.slippery, reason
    if presses is None:
        assert _answer(reply) == total.group(2), reason
        return
    assert presses.group(1) == total.group(2) and _answer(reply) == presses.group(2), reason
    for k, (go, press) in enumerate(
        zip(presses.group(1).split(", "), presses.group(2).split(", "), strict=True)
    ):
        assert (names.index(press) + env._offset(ep.moves + k)) % 4 == names.index(go), reason


def image_probe(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    color = ep.colors[len(ep.answers)]
    name, letter = COLORS[color][0], "ABCDEF"[color]
    assert f"filled with {name}" in reason and f"option {letter}" in reason, reason
    assert _answer(reply) == letter, reason


def minesweeper(env: Any, reason: str, reply: str) -> None:
    field, revealed = env.field, env.revealed
    rows, cols = field.rows, field.cols

    def cell(text: str) -> int:
        return (int(text[1:]) - 1) * cols + ord(text[0]) - ord("A")

    def near(a: int, b: int) -> bool:
        return a != b and abs(a // cols - b // cols) <= 1 and abs(a % cols - b % cols) <= 1

    def number(at: int) -> int:
        return sum(near(at, m) for m in field.mines)

    head = re.match(r"(\d+) cells? (?:is|are) hidden, (\d+) of them mines\.", reason)
    assert head and (int(head.group(1)), int(head.group(2))) == (
        rows * cols - len(revealed),
        len(field.mines),
    )
    named: list[int] = []
    for part in reason[head.end() :].strip().rstrip(".").split("; "):
        said = re.fullmatch(r"(?i:the) (\d) at ([A-P]\d+) (.*), so (.*) (?:is|are) safe", part)
        if said is None:
            said = re.fullmatch(r"No number proves a cell safe, but I know (.*) (?:is|are) safe", part)
            assert said, reason
            safe = [cell(c) for c in re.findall(r"[A-P]\d+", said.group(1))]
        else:
            k, at, why = int(said.group(1)), cell(said.group(2)), said.group(3)
            assert at in revealed and number(at) == k, reason
            safe = [cell(c) for c in re.findall(r"[A-P]\d+", said.group(4))]
            assert all(near(at, c) for c in safe), reason
            found = re.fullmatch(r"already has its (?:mine|\d mines) at (.*)", why)
            if found:
                mines = [cell(c) for c in re.findall(r"[A-P]\d+", found.group(1))]
                assert len(mines) == k and all(m in field.mines and near(at, m) for m in mines), reason
            else:
                pair = re.fullmatch(r"has all its unknown mines next to the (\d) at ([A-P]\d+) too", why)
                assert pair, reason
                other = cell(pair.group(2))
                assert other in revealed and number(other) == int(pair.group(1)), reason
                assert all(not near(other, c) for c in safe), reason  # the cells the other number lacks
        assert all(c not in field.mines and c not in revealed for c in safe), reason
        named += safe
    assert named == [cell(c) for c in _answer(reply).split(", ")], reason


def _lights_after(n: int, lights: int, presses: list[int]) -> int:
    """Lights Out's board after ``presses`` (each flips the light and its four neighbours)."""
    for cell in presses:
        r, c = divmod(cell, n)
        for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
            if 0 <= r + dr < n and 0 <= c + dc < n:
                lights ^= 1 << ((r + dr) * n + c + dc)
    return lights


def lights_out(env: Any, reason: str, reply: str) -> None:
    n, lights = env.config.n, env._ep.lights

    def cells(text: str) -> list[int]:
        return [
            (int(row) - 1) * n + "ABCDEFGH".index(col) for col, row in re.findall(r"\b([A-H])(\d)\b", text)
        ]

    lit = re.match(r"(\d+) lights? (?:is|are) on: (.*?)\. ", reason)
    assert lit and int(lit.group(1)) == bin(lights).count("1"), reason
    assert sorted(cells(lit.group(2))) == [i for i in range(n * n) if lights >> i & 1], reason
    plan = re.search(r"turn them all off: (\d+) \((.*?)\)", reason)
    assert plan and int(plan.group(1)) == len(cells(plan.group(2))), reason
    assert _lights_after(n, lights, cells(plan.group(2))) == 0, reason  # the named presses solve it
    if n <= 3:  # and no smaller set does (every set tried)
        smaller = (s for s in range(1 << (n * n)) if bin(s).count("1") < int(plan.group(1)))
        assert all(_lights_after(n, lights, [i for i in range(n * n) if s >> i & 1]) for s in smaller), reason
    named = re.search(r"I press (.*?) now\.$", reason)
    assert named, reason
    now = plan.group(2).split(", ") if named.group(1) == "them all" else named.group(1).split(", ")
    assert now == plan.group(2).split(", ")[: len(now)] == _answer(reply).split(", "), reason


def _hanoi_distances(disks: int, goal: int) -> dict[tuple[int, ...], int]:
    """Moves from every Tower of Hanoi position (``pegs[d]`` the peg of disk d, 0 the smallest) to all disks
    on ``goal``: a BFS from the solved position (moves reverse)."""
    dist = {(goal,) * disks: 0}
    queue = [(goal,) * disks]
    for at in queue:
        tops = {peg: min((d for d, p in enumerate(at) if p == peg), default=None) for peg in range(3)}
        for src in range(3):
            for dst in range(3):
                disk = tops[src]
                if src != dst and disk is not None and (tops[dst] is None or tops[dst] > disk):
                    nxt = tuple(dst if d == disk else p for d, p in enumerate(at))
                    if nxt not in dist:
                        dist[nxt] = dist[at] + 1
                        queue.append(nxt)
    return dist


def tower_of_hanoi(env: Any, reason: str, reply: str) -> None:
    pegs, goal = env._ep.pegs, env._ep.goal
    head = re.match(
        r"Goal: all (\d+) disks? on ([ABC])\. The largest disk not there is (\d+), on ([ABC]): ", reason
    )
    assert head, reason
    assert (int(head.group(1)), "ABC".index(head.group(2))) == (len(pegs), goal), reason
    largest = max(d for d, p in enumerate(pegs) if p != goal)
    assert (int(head.group(3)), "ABC".index(head.group(4))) == (largest + 1, pegs[largest]), reason
    third = "ABC"[3 - pegs[largest] - goal]
    if re.search(r"(?:disks?) 1(?: to \d+| and 2)? (?:is|are) on ([ABC]), so", reason):
        assert all(pegs[d] == "ABC".index(third) for d in range(largest)), reason
    elif largest:
        assert f"go to {third} first" in reason or f"goes to {third} first" in reason, reason
    dist = _hanoi_distances(len(pegs), goal)
    plan = re.search(r"A shortest solution takes (\d+) more moves?; now: (.*)\.$", reason)
    assert plan and int(plan.group(1)) == dist[pegs], reason
    assert plan.group(2) == _answer(reply), reason
    at = pegs
    for src, dst in re.findall(r"([ABC])->([ABC])", plan.group(2)):  # each move legal and one nearer solved
        disk = min(d for d, p in enumerate(at) if p == "ABC".index(src))
        nxt = tuple("ABC".index(dst) if d == disk else p for d, p in enumerate(at))
        assert dist.get(nxt) == dist[at] - 1, reason
        at = nxt


def clock(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    hour, minute = divmod(ep.shown, 60)
    hour = hour or 12
    hands = re.match(
        r"The hour hand is (?:between (\d+) and (\d+)|on (\d+)) and the minute hand is on ", reason
    )
    assert hands, reason
    if minute:  # the hour hand has left the hour by minute/60 of the way to the next
        assert (int(hands.group(1) or 0), int(hands.group(2) or 0)) == (hour, hour % 12 + 1), reason
        assert f"the minute hand is on {minute} minutes," in reason, reason
    else:
        assert int(hands.group(3) or 0) == hour and "the minute hand is on the 12," in reason, reason
    assert f"so the clock shows {hour}:{minute:02d}." in reason, reason
    later = re.search(r" (\d+) minutes later it is (\d+):(\d\d)\.$", reason)
    assert (later is not None) == (ep.later is not None), reason
    if later:
        total = (hour % 12) * 60 + minute + int(later.group(1))
        assert int(later.group(1)) == ep.later, reason
        assert ((int(later.group(2)) % 12) * 60 + int(later.group(3))) == total % 720, reason
    said = later.group(2) + ":" + later.group(3) if later else f"{hour}:{minute:02d}"
    assert _answer(reply) == said, reason


def _slides(board: tuple[str, ...], n: int) -> list[tuple[tuple[str, ...], str]]:
    """Every board one Rush Hour move from ``board`` (rows of letters, '.' empty), with the move's text."""
    cells: dict[str, list[tuple[int, int]]] = {}
    for r, row in enumerate(board):
        for c, ch in enumerate(row):
            if ch != ".":
                cells.setdefault(ch, []).append((r, c))
    out = []
    for car, at in cells.items():
        flat = at[0][0] == at[-1][0]
        for sign, word in ((-1, "left" if flat else "up"), (1, "right" if flat else "down")):
            for k in range(1, n):
                moved = [(r, c + sign * k) if flat else (r + sign * k, c) for r, c in at]
                if not all(0 <= r < n and 0 <= c < n and board[r][c] in (".", car) for r, c in moved):
                    break
                after = [list(row) for row in board]
                for r, c in at:
                    after[r][c] = "."
                for r, c in moved:
                    after[r][c] = car
                out.append((tuple("".join(row) for row in after), f"{car} {word} {k}"))
    return out


def _moves_to_exit(board: tuple[str, ...], n: int) -> int:
    row = next(r for r, line in enumerate(board) if "X" in line)
    seen, frontier, depth = {board}, [board], 0
    while frontier:
        if any(b[row][n - 1] == "X" for b in frontier):
            return depth
        frontier = [nxt for b in frontier for nxt, _ in _slides(b, n) if not (nxt in seen or seen.add(nxt))]
        depth += 1
    raise AssertionError("the red car cannot get out")


def rush_hour(env: Any, reason: str, reply: str) -> None:
    n = env.config.size
    board = tuple("".join(row) for row in grid(env.layout, env.position))
    row = next(r for r, line in enumerate(board) if "X" in line)
    left = board[row].index("X")
    assert reason.startswith(f"X is in row {row + 1}, columns {left + 1}-{left + 2};"), reason
    way = re.search(r"In its way: (.*?)\.", reason)
    named = re.findall(r"([A-Z]) \(column (\d+)\)", way.group(1)) if way else []
    assert named == [(ch, str(c + 1)) for c, ch in enumerate(board[row]) if c > left + 1 and ch != "."], (
        reason
    )
    total = re.search(r"takes (\d+) more moves?; next: (.*)\.$", reason)
    assert total and int(total.group(1)) == _moves_to_exit(board, n), reason
    assert total.group(2) == _answer(reply), reason
    for move in total.group(2).split(", "):
        board = next(b for b, text in _slides(board, n) if text == move)
    assert _moves_to_exit(board, n) == int(total.group(1)) - len(total.group(2).split(", ")), reason


def matchstick(env: Any, reason: str, reply: str) -> None:
    shown = env.shown
    said = re.fullmatch(
        r"The sticks read (.+?), which is false: (\d+) ([+-]) (\d+) makes (-?\d+)\. Moving one stick turns "
        r"(.+), giving (.+?), which is true\.",
        reason,
    )
    assert said and said.group(1) == str(shown), reason
    a, op, b, value = int(said.group(2)), said.group(3), int(said.group(4)), int(said.group(5))
    assert (str(a), op, str(b)) == (shown.left, shown.op, shown.right), reason
    assert value == (a + b if op == "+" else a - b) != int(shown.result), reason
    answer = said.group(7)
    assert answer == _answer(reply), reason
    left, sign, right, _, result = answer.split()
    assert (int(left) + int(right) if sign == "+" else int(left) - int(right)) == int(result), reason
    before, after = shown.symbols, left + sign + right + result
    assert len(before) == len(after), reason
    moved = sum(len(SEGMENTS[x] - SEGMENTS[y]) for x, y in zip(before, after, strict=True))
    added = sum(len(SEGMENTS[y] - SEGMENTS[x]) for x, y in zip(before, after, strict=True))
    assert moved == added == 1, reason
    named = re.findall(
        r"the (\d|plus sign|minus sign) (?:in the [a-z ]+ )?into a (\d|plus sign|minus sign)", reason
    )
    sign_name = {"+": "plus sign", "-": "minus sign"}
    changed = [
        (sign_name.get(x, x), sign_name.get(y, y)) for x, y in zip(before, after, strict=True) if x != y
    ]
    assert named == changed, reason


def orientations_of(cells: frozenset, mirror: bool) -> set[frozenset]:
    """Every orientation of a polyomino (``cells`` of (row, column)), shifted to the top left: four quarter
    turns, and their mirror images where ``mirror``."""

    def shifted(points: list) -> frozenset:
        top, left = min(r for r, _ in points), min(c for _, c in points)
        return frozenset((r - top, c - left) for r, c in points)

    out, shapes = set(), [list(cells)] + ([[(r, -c) for r, c in cells]] if mirror else [])
    for points in shapes:
        for _ in range(4):
            points = [(c, -r) for r, c in points]
            out.add(shifted(points))
    return out


def _placed_shape(drawn: tuple, degrees: int, mirror: bool) -> frozenset:
    """A piece drawn as ``drawn`` after mirroring (left to right) and then ``degrees`` clockwise."""
    points = [(r, -c) if mirror else (r, c) for r, c in drawn]
    for _ in range(degrees // 90):
        points = [(c, -r) for r, c in points]
    top, left = min(r for r, _ in points), min(c for _, c in points)
    return frozenset((r - top, c - left) for r, c in points)


def packable(free: frozenset, shapes: list, mirror: bool) -> bool:
    """Whether ``shapes`` (each a frozenset of cells) cover the ``free`` cells exactly, turned (and
    mirrored): fill the first free cell in reading order with each piece and orientation that fits."""
    if not free:
        return not shapes
    first = min(free)
    for i, shape in enumerate(shapes):
        for turned in orientations_of(shape, mirror):
            anchor = min(turned)
            cells = {(r - anchor[0] + first[0], c - anchor[1] + first[1]) for r, c in turned}
            if cells <= free and packable(free - cells, shapes[:i] + shapes[i + 1 :], mirror):
                return True
    return False


def polyomino_packing(env: Any, reason: str, reply: str) -> None:
    level, placed, mirror = env.level, env.placed, env.config.mirror
    left = [p for p in range(len(level.pieces)) if p not in placed]
    free = frozenset(level.region) - {c for cells in placed.values() for c in cells}
    head = re.match(r"(\d+) free cells?, (\d+) pieces? left(?:: ([A-L, and]+))?\.", reason)
    assert head and (int(head.group(1)), int(head.group(2))) == (len(free), len(left)), reason
    assert re.findall(r"[A-L]", head.group(3) or "") == [chr(65 + p) for p in left], reason
    total = re.search(r"it takes (\d+) more actions?\.$", reason)
    shapes = {p: frozenset(level.pieces[p]) for p in range(len(level.pieces))}

    def cells_of(text: str) -> set:
        return {(int(r) - 1, int(c) - 1) for r, c in re.findall(r"\((\d+),(\d+)\)", text)}

    removal = re.fullmatch(r"remove ([A-L])", _answer(reply))
    if removal:
        piece = ord(removal.group(1)) - 65
        said = re.search(
            r"At most (\d+) of the (\d+) placed pieces can stay .* moves ([A-L]) at (.*?), so", reason
        )
        assert said and int(said.group(2)) == len(placed) and said.group(3) == removal.group(1), reason
        assert cells_of(said.group(4)) == set(placed[piece]), reason

        def stays(keep: tuple) -> bool:
            rest = frozenset(level.region) - {c for p in keep for c in placed[p]}
            return packable(rest, [shapes[p] for p in shapes if p not in keep], mirror)

        most = max(
            k for k in range(len(placed) + 1) for keep in itertools.combinations(placed, k) if stays(keep)
        )
        assert int(said.group(1)) == most, reason  # no packing keeps more
        others = [p for p in placed if p != piece]
        assert any(stays(keep) for keep in itertools.combinations(others, most)), reason  # one without it
        assert total and int(total.group(1)) == len(shapes) + len(placed) - 2 * most, reason
        return
    move = re.fullmatch(r"piece ([A-L]), (mirror, )?rotate (\d+), at row (\d+) col (\d+)", _answer(reply))
    assert move, reply
    piece, degrees = ord(move.group(1)) - 65, int(move.group(3))
    turn = {(0, False): "not turned", (0, True): "mirrored"}.get((degrees, bool(move.group(2))))
    turn = turn or f"{'mirrored, then ' if move.group(2) else ''}turned {degrees}° clockwise"
    assert f"Piece {move.group(1)}, {turn}, covers" in reason, reason
    shape = _placed_shape(level.pieces[piece], degrees, bool(move.group(2)))
    cells = {(r + int(move.group(4)) - 1, c + int(move.group(5)) - 1) for r, c in shape}
    named = re.search(r"covers ((?:\(\d+,\d+\) ?)+), and", reason)
    assert named and cells_of(named.group(1)) == cells and cells <= free, reason
    rest = [shapes[p] for p in left if p != piece]
    assert packable(free - cells, rest, mirror), reason  # the pieces left fill the rest
    assert total and int(total.group(1)) == len(left), reason


TRUTH: dict[str, Check] = {
    "sokoban": sokoban,
    "geo3k": geo3k,
    "zoom_search": zoom_search,
    "chart_calc": chart_calc,
    "fog_maze": fog_maze,
    "jigsaw": jigsaw,
    "mental_rotation": mental_rotation,
    "frozen_lake": frozen_lake,
    "lights_out": lights_out,
    "tower_of_hanoi": tower_of_hanoi,
    "clock": clock,
    "sliding_puzzle": sliding_puzzle,
    "minesweeper": minesweeper,
    "rush_hour": rush_hour,
    "matchstick": matchstick,
    "image_probe": image_probe,
    "polyomino_packing": polyomino_packing,
}
