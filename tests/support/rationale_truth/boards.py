"""Truth checks of the rationales of board and maze envs: each plays the env's rules again."""

from __future__ import annotations

import re
from typing import Any

from rationale_truth.common import MOVES, answer_text
from vlm_envs.envs.fog_maze.maze import can_move
from vlm_envs.envs.fog_maze.oracle import shortest_actions
from vlm_envs.envs.jigsaw.board import swap
from vlm_envs.envs.keys_doors.solver import plan, solver_state
from vlm_envs.envs.keys_doors.world import COLOURS, LAVA, OPEN, PICKUP, act
from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, TURNS, key, mirrored, oriented, turn
from vlm_envs.envs.rush_hour.board import grid


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
    assert re.findall(MOVES, plan.group(1)) == re.findall(MOVES, answer_text(reply)), reason
    first_push = re.search(r"push the box at \((\d+), (\d+)\)", plan.group(1))
    if first_push:  # the first box pushed is there now
        assert cell(*first_push.groups()) in state.boxes, reason
    for row, col in re.findall(r"to \((\d+), (\d+)\), onto a target", reason):
        assert cell(row, col) in layout.targets, reason


def fog_maze(env: Any, reason: str, reply: str) -> None:
    ep, cfg = env._ep, env.config
    walls, cell = ep.maze.walls, ep.cell
    path = shortest_actions(walls, cell, ep.heading, ep.maze.goal, cfg.view)
    names = {"local": ("Up", "Right", "Down", "Left"), "first_person": ("Forward", "TurnLeft", "TurnRight")}
    way = re.search(r"A shortest path to the goal (?:is|starts) (.*)\.$", reason)
    assert way, reason
    named = way.group(1).split(", ")
    assert named == [names[cfg.view][a] for a in path[: len(named)]] == answer_text(reply).split(", "), reason
    if cfg.view == "first_person":
        assert reason.startswith(f"I face {('north', 'east', 'south', 'west')[ep.heading]}"), reason
        assert ("wall right in front of me" in reason) == (not can_move(walls, cell, ep.heading)), reason
        return
    opened = re.search(r"the way is open (.*?)[;.]", reason)
    assert opened, reason
    assert set(re.findall(MOVES, opened.group(1))) == {
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
    assert set(re.findall(MOVES, lava.group(1)) if lava else ()) == near, reason
    left = ep.table[solver_state(level, state)]
    way = re.search(r"A shortest way takes (\d+) actions?; next: (.*)\.$", reason)
    assert way and int(way.group(1)) == left, reason
    assert way.group(2).split(", ") == answer_text(reply).split(", "), reason
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
    assert [f"swap({a},{b})" for a, b, _ in swaps] == answer_text(reply).split(), reason
    for a, b, tiles in swaps:
        board = swap(board, int(a) - 1, int(b) - 1)
        assert all(board[int(t) - 1] == int(t) - 1 for t in re.findall(r"\d+", tiles)), reason


def mental_rotation(env: Any, reason: str, reply: str) -> None:
    ep = env._ep
    if env.config.mode == "rotate":
        assert f"shape of {len(ep.cubes)} cubes" in reason, reason
        turns = re.search(r"quarter turns? ((?:[xyz][+-] ?)+)", reason).group(1).split()
        assert answer_text(reply).split() == turns[: len(answer_text(reply).split())], reason
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
    assert [d for _, d in slides] == answer_text(reply).split(", "), reason
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
    assert set(re.findall(MOVES, holes.group(1)) if holes else ()) == near, reason
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
        assert answer_text(reply) == total.group(2), reason
        return
    assert presses.group(1) == total.group(2) and answer_text(reply) == presses.group(2), reason
    for k, (go, press) in enumerate(
        zip(presses.group(1).split(", "), presses.group(2).split(", "), strict=True)
    ):
        assert (names.index(press) + env._offset(ep.moves + k)) % 4 == names.index(go), reason


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
    assert named == [cell(c) for c in answer_text(reply).split(", ")], reason


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
    assert now == plan.group(2).split(", ")[: len(now)] == answer_text(reply).split(", "), reason


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
    assert plan.group(2) == answer_text(reply), reason
    at = pegs
    for src, dst in re.findall(r"([ABC])->([ABC])", plan.group(2)):  # each move legal and one nearer solved
        disk = min(d for d, p in enumerate(at) if p == "ABC".index(src))
        nxt = tuple("ABC".index(dst) if d == disk else p for d, p in enumerate(at))
        assert dist.get(nxt) == dist[at] - 1, reason
        at = nxt


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


def moves_to_exit(board: tuple[str, ...], n: int) -> int:
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
    assert total and int(total.group(1)) == moves_to_exit(board, n), reason
    assert total.group(2) == answer_text(reply), reason
    for move in total.group(2).split(", "):
        board = next(b for b, text in _slides(board, n) if text == move)
    assert moves_to_exit(board, n) == int(total.group(1)) - len(total.group(2).split(", ")), reason
