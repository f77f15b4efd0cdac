"""Per-env checks that an oracle rationale states true facts: each reads the env's own state (and its
rules), parses the facts the rationale names, and asserts they hold. ``TRUTH[name](env, reason, reply)``."""

from __future__ import annotations

import itertools
import json
import re
from collections import deque
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from falling_blocks_rules import drop, fewest_placements, from_rows

from vlm_envs.envs.chart_calc.calc import evaluate
from vlm_envs.envs.clutter_count.shapes import shape_masks
from vlm_envs.envs.fog_maze.maze import can_move
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.envs.image_probe import COLORS
from vlm_envs.envs.jigsaw.board import swap
from vlm_envs.envs.keys_doors.solver import plan, solver_state
from vlm_envs.envs.keys_doors.world import COLOURS, LAVA, OPEN, PICKUP, act
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


def keys_doors(env: Any, reason: str, reply: str) -> None:
    ep, cfg = env._ep, env.config
    level, state = ep.level, ep.state
    names = ("Up", "Down", "Left", "Right", "Pickup", "Open")
    steps = ((-1, 0), (1, 0), (0, -1), (0, 1))
    carry = re.match(r"I carry (?:no key|the (.*?) keys?)\. ", reason)
    assert carry, reason
    held = [COLOURS[key.colour] for i, key in enumerate(level.keys) if state.held >> i & 1]
    assert re.findall(r"[a-z]+", (carry.group(1) or "").replace(" and ", " ")) == held, reason
    (r, c) = state.cell
    lava = re.search(r"Lava is next to me: (.*?)\. ", reason)
    near = {names[d] for d, (dr, dc) in enumerate(steps) if level.cells[r + dr][c + dc] == LAVA}
    assert set(re.findall(_MOVES, lava.group(1)) if lava else ()) == near, reason
    left = ep.table[solver_state(level, state)]
    way = re.search(r"A shortest way takes (\d+) actions?; next: (.*)\.$", reason)
    assert way and int(way.group(1)) == left, reason
    assert way.group(2).split(", ") == _answer(reply).split(", "), reason
    sub = re.search(
        r"Next sub-goal: (pick up the (\w+) key|open the (\w+)[a-z ]* doors?|reach the goal), (.*?)\. ",
        reason,
    )
    assert sub, reason
    here = state  # where the shortest way does its first Pickup or Open
    for action in plan(level, ep.table, state, left):
        if action in (PICKUP, OPEN):
            break
        here, _ = act(level, here, action)
    else:
        action = None
    if sub.group(2):
        key = next(k for k in level.keys if COLOURS[k.colour] == sub.group(2))
        assert action == PICKUP and key.cell == here.cell, reason
        target = key.cell
    elif sub.group(3):
        i, door = next((i, d) for i, d in enumerate(level.doors) if COLOURS[d.colour] == sub.group(3))
        assert action == OPEN and not state.opened >> i & 1 and state.held >> i & 1, reason
        assert abs(door.cell[0] - here.cell[0]) + abs(door.cell[1] - here.cell[1]) == 1, reason
        target = door.cell
    else:
        assert action is None, reason
        target = level.goal
    where = sub.group(4)
    if where == "out of sight":
        assert cfg.view == "local" and not ep.sight[target], reason
        return
    if cfg.view == "local":
        assert ep.sight[target], reason
    offsets = {side: int(n) for n, side in re.findall(r"(\d+) cells? (up|down|left|right)", where)}
    rows, cols = target[0] - r, target[1] - c
    assert offsets == {
        k: v for k, v in {"up": -rows, "down": rows, "left": -cols, "right": cols}.items() if v > 0
    }, reason
    assert (where == "here under me") == (target == state.cell), reason


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


def _c4_columns(env: Any) -> tuple[tuple[str, ...], int]:
    """The board of the state text as columns of marks bottom to top (``X`` yours, ``O`` the engine's), and
    its rows."""
    lines = [line.split()[1:] for line in env.state_text().splitlines() if line.split()[:1] != []]
    grid = [row for row in lines if row and set(row) <= {"X", "O", "."}]
    rows = len(grid)
    return tuple(
        "".join(grid[rows - 1 - r][c] for r in range(rows)).rstrip(".") for c in range(len(grid[0]))
    ), rows


def _c4_four_at(cols: tuple[str, ...], col: int, row: int, mark: str) -> list[tuple[int, int]]:
    """A line of four ``mark`` through (col, row) (rows from 0 at the bottom), else []."""

    def at(c: int, r: int) -> str:
        return cols[c][r] if 0 <= c < len(cols) and 0 <= r < len(cols[c]) else ""

    for dc, dr in ((1, 0), (0, 1), (1, 1), (1, -1)):
        run = [(col, row)]
        for sign in (1, -1):
            c, r = col + sign * dc, row + sign * dr
            while at(c, r) == mark:
                run.append((c, r))
                c, r = c + sign * dc, r + sign * dr
        if len(run) >= 4:
            return sorted(run)
    return []


def _c4_drop(cols: tuple[str, ...], col: int, mark: str) -> tuple[str, ...]:
    return (*cols[:col], cols[col] + mark, *cols[col + 1 :])


def _c4_forced(cols: tuple[str, ...], rows: int, moves: int, memo: dict) -> bool:
    """Whether X, to move, makes four within ``moves`` of its moves whatever O replies (plain minimax)."""
    key = (cols, moves)
    if key not in memo:
        memo[key] = any(
            _c4_forces(cols, rows, col, moves, memo) for col in range(len(cols)) if len(cols[col]) < rows
        )
    return memo[key]


def _c4_forces(cols: tuple[str, ...], rows: int, col: int, moves: int, memo: dict) -> bool:
    """Whether X dropping into ``col`` wins within ``moves`` (this one included) whatever O replies."""
    after = _c4_drop(cols, col, "X")
    if _c4_four_at(after, col, len(after[col]) - 1, "X"):
        return True
    replies = [c for c in range(len(after)) if len(after[c]) < rows]
    if moves <= 1 or not replies:
        return False
    for reply in replies:
        answered = _c4_drop(after, reply, "O")
        if _c4_four_at(answered, reply, len(answered[reply]) - 1, "O"):
            return False
        if not _c4_forced(answered, rows, moves - 1, memo):
            return False
    return True


def _c4_line(where: str) -> list[tuple[int, int]]:
    """The cells (column, row, from 1) a rationale's words name: across, up or diagonally."""
    across = re.fullmatch(r"across row (\d+), columns (\d+) to (\d+)", where)
    if across:
        r, c0, c1 = map(int, across.groups())
        return [(c, r) for c in range(c0, c1 + 1)]
    up = re.fullmatch(r"up column (\d+), rows (\d+) to (\d+)", where)
    if up:
        c, r0, r1 = map(int, up.groups())
        return [(c, r) for r in range(r0, r1 + 1)]
    diagonal = re.fullmatch(r"diagonally from column (\d+) row (\d+) to column (\d+) row (\d+)", where)
    assert diagonal, where
    c0, r0, c1, r1 = map(int, diagonal.groups())
    return [(c0 + k, r0 + k * (1 if r1 > r0 else -1)) for k in range(c1 - c0 + 1)]


def connect_four(env: Any, reason: str, reply: str) -> None:
    cols, rows = _c4_columns(env)
    col = int(_answer(reply)) - 1
    after = _c4_drop(cols, col, "X")
    row = len(after[col]) - 1
    now = re.fullmatch(r"Column (\d+) makes four in a row (.*): I win now\.", reason)
    if now:
        named = _c4_line(now.group(2))
        assert int(now.group(1)) == col + 1 and len(named) == 4 and (col + 1, row + 1) in named, reason
        assert all(after[c - 1][r - 1 : r] == "X" for c, r in named), reason
        return
    legal = [c for c in range(len(cols)) if len(cols[c]) < rows]
    blocked = re.match(r"The engine would make four at column (\d+) row (\d+) next, so I block it\. ", reason)
    if blocked:
        assert (int(blocked.group(1)), int(blocked.group(2))) == (col + 1, row + 1), reason
        assert _c4_four_at(_c4_drop(cols, col, "O"), col, row, "O"), reason
    else:
        assert reason.startswith("No column wins at once. "), reason
    assert not any(_c4_four_at(_c4_drop(cols, c, "X"), c, len(cols[c]), "X") for c in legal), reason
    wins = re.search(
        r"Column (\d+) wins in (\d+) of my moves whatever the engine replies, and no column wins sooner\.",
        reason,
    )
    assert wins and int(wins.group(1)) == col + 1, reason
    moves, memo = int(wins.group(2)), {}
    assert _c4_forces(cols, rows, col, moves, memo), reason  # the column wins that fast against any defence
    assert not _c4_forced(cols, rows, moves - 1, memo), reason  # and nothing wins faster
    threats = re.search(r"It threatens four at (.*)\.$", reason)
    for c, r in re.findall(r"column (\d+) row (\d+)", threats.group(1) if threats else ""):
        c, r = int(c) - 1, int(r) - 1
        assert len(after[c]) <= r, reason  # an empty cell
        filled = (*after[:c], after[c].ljust(r, ".") + "X", *after[c + 1 :])
        assert _c4_four_at(filled, c, r, "X"), reason  # where a stone of mine makes four


def clutter_count(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    scene = ep.scene
    plural = f"{scene.kind}es" if scene.kind.endswith("s") else f"{scene.kind}s"
    targets = [i for i, p in enumerate(scene.pieces) if (p.color, p.kind) == (scene.color, scene.kind)]
    shown = np.bincount(scene.owner[scene.owner >= 0], minlength=len(scene.pieces))
    hidden = sum(
        int(shown[i])
        < int(shape_masks(scene.pieces[i].kind, scene.pieces[i].radius, scene.pieces[i].angle).mask.sum())
        for i in targets
    )
    assert int(re.search(r"\d+", reason).group()) == len(targets), reason  # the first number is the count
    assert f"{len(targets)} {scene.color} {plural}" in reason, reason
    assert (f"{hidden} of them partly hidden" if hidden else "none of them hidden") in reason, reason
    if "<tool_call>" not in reply:
        assert f"\\boxed{{{len(targets)}}}" in reply, reply
        marked = {int(scene.owner[y, x]) for x, y in ep.marks}
        assert ("carries a mark" in reason) == (set(targets) <= marked), reason
        return
    points = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])["arguments"][
        "points"
    ]
    limit = 1000 if env.config.coords == "relative1000" else env.config.image_size
    size = env.config.image_size
    owners = [
        int(scene.owner[min(size - 1, y * size // limit), min(size - 1, x * size // limit)])
        for x, y in points
    ]
    unmarked = [i for i in targets if i not in {int(scene.owner[y, x]) for x, y in ep.marks}]
    assert sorted(owners) == unmarked and "I mark the centre" in reason, (reason, reply)


def falling_blocks(env: Any, reason: str, reply: str) -> None:
    ep, cfg = env._ep, env.config
    coming, filled = ep.level.sequence[ep.placed :], from_rows(ep.board)
    said = re.fullmatch(
        r"(\d+) lines? to clear; the (fewest placements|placements of my plan) that clear (?:it|them) "
        r"with the pieces to come: (\d+)\. "
        r"Now the ([IOTSZJL]) at rotate (\d), column (\d+): it comes to rest on rows? (\d+)(?: to (\d+))? "
        r"and clears (no line|(?:row \d+(?:, )?)+)\.",
        reason,
    )
    assert said, reason
    lines, fewest, piece = int(said.group(1)), int(said.group(3)), said.group(4)
    rotation, column = int(said.group(5)), int(said.group(6))
    assert (lines, piece) == (ep.lines_left, coming[0]), reason
    assert _answer(reply) == f"rotate {rotation}, column {column}", reason
    after, (low, high), cleared, out = drop(filled, piece, rotation, column - 1, cfg.width, cfg.height)
    rested = int(said.group(7)), int(said.group(8) or said.group(7))
    assert not out and rested == (low + 1, high + 1), reason
    named = [int(r) for r in re.findall(r"row (\d+)", said.group(9))]
    assert named == [r + 1 for r in cleared], reason
    assert 1 <= fewest <= len(coming), reason
    if fewest == 1:
        assert len(cleared) >= lines, reason
    if said.group(2) == "fewest placements" and fewest <= 2 and cfg.width <= 8:  # every placement tried
        assert fewest_placements(filled, coming, lines, cfg.width, cfg.height, fewest) == fewest, reason
        if len(cleared) < lines:  # and the drop named leaves a position one drop from the goal
            left = lines - len(cleared)
            assert fewest_placements(after, coming[1:], left, cfg.width, cfg.height, 1) == 1, reason


def _fewest_rides(lines: dict[str, list[str]], start: str, goal: str) -> int:
    """The fewest rides from ``start`` to ``goal`` (a ride: any two stops of one line), by breadth first."""
    dist, queue = {start: 0}, deque([start])
    while queue:
        at = queue.popleft()
        for stops in lines.values():
            for stop in stops if at in stops else ():
                if stop not in dist:
                    dist[stop] = dist[at] + 1
                    queue.append(stop)
    return dist[goal]


def transit_map(env: Any, reason: str, reply: str) -> None:
    ep, numbered = env._ep, env.config.numbered
    network = ep.trip.network
    title = {
        i: f"Line {line.name}" if numbered else f"{line.name} line" for i, line in enumerate(network.lines)
    }
    lines = {title[i]: [network.names[s] for s in line.stops] for i, line in enumerate(network.lines)}
    at, goal = network.names[ep.at], network.names[ep.trip.destination]
    said = re.fullmatch(
        r"I am at (\w+), served by (.+?)\. (\w+) is (\d+) rides? away at the fewest: (.+)\. Now: (.+)\.",
        reason,
    )
    assert said and said.group(1) == at and said.group(3) == goal, reason
    named = re.findall(r"(\w+ line|Line \d+)", said.group(2))
    assert sorted(named) == sorted(t for t, stops in lines.items() if at in stops), reason
    fewest = _fewest_rides(lines, at, goal)
    legs = said.group(5).split(", then ")
    assert int(said.group(4)) == len(legs) == fewest, reason
    here = at
    for leg in legs:
        line, stop = leg.split(" to ")
        assert here in lines[line] and stop in lines[line] and stop != here, reason
        here = stop
    assert here == goal and said.group(6) == legs[0], reason
    assert _answer(reply) == f"ride {legs[0]}", reason


def _l1_motion(frames: Any, order: Any) -> int:
    """How far ``order`` (frame indices) moves the objects: L1 steps summed over objects and steps."""
    return sum(
        abs(p[0] - q[0]) + abs(p[1] - q[1])
        for a, b in itertools.pairwise(order)
        for p, q in zip(frames[a], frames[b], strict=True)
    )


def frame_order(env: Any, reason: str, reply: str) -> None:
    labels, frames = env.animation.labels, env.animation.motion.frames
    said = re.fullmatch(
        r"Frame ([A-H]) is the first\. Of the orders that start with \1, ([A-H](?:, [A-H])*) moves the "
        r"objects least: (\d+) units in all \(across plus up-down, summed over the objects\), and any other "
        r"order at least (\d+)\.",
        reason,
    )
    assert said and said.group(1) == labels[0], reason
    order = said.group(2).split(", ")
    assert said.group(2) == _answer(reply) and tuple(order) == labels, reason
    time = {letter: t for t, letter in enumerate(labels)}
    assert int(said.group(3)) == _l1_motion(frames, [time[x] for x in order]), reason
    others = itertools.permutations(range(1, len(labels)))
    least = min(_l1_motion(frames, (0, *rest)) for rest in others if list(rest) != sorted(rest))
    assert int(said.group(4)) == least > int(said.group(3)), reason


def spot_difference(env: Any, reason: str, reply: str) -> None:
    scene, grid = env._ep.drawn.scene, env.config.grid
    names = {f"{chr(65 + c % grid)}{c // grid + 1}": c for c in range(grid * grid)}
    claims = re.findall(r"in ([A-L]\d+) the (.+?) (is|has) (.+?)(?:;|\. )", reason)
    assert [names[cell] for cell, *_ in claims] == list(scene.cells), reason
    count = re.search(r"(\d+) cells? differs?", reason)
    assert count and int(count.group(1)) == len(scene.cells), reason  # the count it states is the count
    image = "the copy" if env.config.altered == 1 else None
    for (cell, before, _, change), d in zip(claims, scene.differences, strict=True):
        assert before == d.before.described() and cell == f"{chr(65 + d.cell % grid)}{d.cell // grid + 1}"
        where = image or f"image {d.copy + 1}"
        assert change.endswith(f"in {where}") or change.endswith(f"from {where}"), reason
        if d.after is None:
            assert change.startswith("missing"), reason
        elif d.kind == "recoloured":
            assert change == f"{d.after.color} in {where}" != f"{d.before.color} in {where}", reason
        elif d.kind == "reshaped":
            assert change == f"a {d.after.shape} in {where}" and d.after.shape != d.before.shape, reason
        elif d.kind == "resized":
            assert change.startswith("larger" if d.after.side > d.before.side else "smaller"), reason
        else:
            assert change.startswith("moved") and d.after.box != d.before.box, reason
    if "<tool_call>" in reply:
        box = re.search(r"I zoom into ([A-L]\d+), \[([\d, ]+)\]", reason)
        assert box and names[box.group(1)] == scene.cells[0], reason
        call = json.loads(reply[reply.index("<tool_call>") + 11 : reply.index("</tool_call>")])
        assert [int(v) for v in box.group(2).split(", ")] == call["arguments"]["bbox"], reason
        return
    said = re.search(r"So the differing cells are (.+)\.$", reason)
    assert said, reason
    assert sorted(re.findall(r"[A-L]\d+", said.group(1))) == sorted(re.findall(r"[A-L]\d+", _answer(reply)))


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
    "keys_doors": keys_doors,
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
    "connect_four": connect_four,
    "clutter_count": clutter_count,
    "falling_blocks": falling_blocks,
    "transit_map": transit_map,
    "frame_order": frame_order,
    "spot_difference": spot_difference,
    "polyomino_packing": polyomino_packing,
}
