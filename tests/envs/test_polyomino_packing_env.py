"""PolyominoPacking: the geometry of turns and mirrors, the answer parser, the rules on hand-built levels, the
packing search and the distance against an independent search over every position, the oracle winning every
seed per level in one turn a piece, random play, the picture's cells, seed-exactness, hostile replies."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)
from rationale_truth import TRUTH, _turns, packable

from vlm_envs.checker import check_env
from vlm_envs.envs.polyomino_packing import generator
from vlm_envs.envs.polyomino_packing.actions import Action, format_action, parse_action
from vlm_envs.envs.polyomino_packing.generator import Level, generate
from vlm_envs.envs.polyomino_packing.render import COLORS
from vlm_envs.envs.polyomino_packing.rules import covered, next_action, plan, played, refusal
from vlm_envs.envs.polyomino_packing.shapes import canonical, mirrored, normalized, orientations, turned
from vlm_envs.envs.polyomino_packing.solver import pack
from vlm_envs.registry import build_env
from vlm_envs.state_signals import UNREACHABLE

TARGET = "vlm_envs.envs.polyomino_packing"
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


# ----- geometry and answers -----


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


def test_the_answer_parser_reads_placements_and_removals_and_refuses_the_rest():
    assert parse_action("<answer>piece B, rotate 90, at row 2 col 3</answer>").action == Action(
        1, False, 90, False, 1, 2
    )
    assert parse_action(
        "ok <answer> Piece c ,MIRROR, Rotate 270°, at Row 10, Column 1. </answer>"
    ).action == Action(2, False, 270, True, 9, 0)
    assert parse_action("<answer>A row 1 col 1</answer>").action == Action(0, False, 0, False, 0, 0)
    assert parse_action("<answer>remove piece D</answer>").action == Action(3, remove=True)
    errors = {
        "<answer>piece B, rotate 90, mirror, at row 2 col 3</answer>": "write mirror before rotate",
        "<answer>piece B, rotate 45, at row 2 col 3</answer>": "not a quarter turn",
        "<answer>piece B at row 2 col 3; piece C at row 1 col 1</answer>": "is not one action",
        "<answer>put B somewhere</answer>": "is not one action",
        "piece B, rotate 90, at row 2 col 3": "no <answer>",
    }
    for text, says in errors.items():
        assert says in parse_action(text).error, text
    assert "<" not in parse_action("<answer><image> B</answer>").error
    action = Action(4, False, 180, True, 0, 6)
    assert parse_action(format_action(action)).action == action


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
            for form in _turns(frozenset(shape), mirror):
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
        for form in _turns(frozenset(shape), mirror):
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


def test_the_oracle_takes_back_a_piece_out_of_place_and_explains_it():
    env = build_env(TARGET)
    env.reset(seed=0)
    start = env.distance_to_goal()
    _, _, step = env.step("<answer>piece A, rotate 0, at row 1 col 3</answer>")  # fits, in no packing
    assert step.metrics["action_valid"] and env.distance_to_goal() == start + 1
    reply, reason = env.oracle_response(), env.oracle_rationale()
    assert reply == "<answer>remove A</answer>" and "so I take it back" in reason
    TRUTH["polyomino_packing"](env, reason, reply)
    while not env.step(env.oracle_response())[1]:
        pass
    assert env.episode_reward() == 1.0 and env.placed and len(env.placed) == 5


def test_without_removals_a_dead_end_is_unreachable_and_the_oracle_has_no_reply():
    env = build_env(TARGET, removals=False)
    env.reset(seed=0)
    env.step("<answer>piece A, rotate 0, at row 1 col 3</answer>")
    assert env.distance_to_goal() == UNREACHABLE and env.oracle_response() is None
    _, _, step = env.step("<answer>remove A</answer>")
    assert step.metrics["format_valid"] and not step.metrics["action_valid"]


def test_a_level_past_the_search_budget_has_no_distance_but_the_oracle_still_wins(monkeypatch):
    monkeypatch.setattr(generator, "MAX_NODES", 1)
    env = build_env(TARGET, difficulty="hard")
    _, info = env.reset(seed=0)
    assert info["distance_exact"] is False and info["attempt"] == generator.LEVEL_ATTEMPTS - 1
    assert env.distance_to_goal() is None
    assert play(env, 0, "oracle")["success"] is True
    env.reset(seed=0)
    env.step(format_action(next(a for a in _misplaced(env))))
    assert env.oracle_response().startswith("<answer>remove ")


def _misplaced(env):
    """Placements that fit but are not the generator's own."""
    level = env.level
    for p, spots in _all_placements(level, env.config.mirror).items():
        for cells in spots:
            if tuple(sorted(cells)) != level.solution[p]:
                orient = orientations(level.pieces[p], env.config.mirror)[normalized(cells)]
                yield Action(p, False, *orient, min(r for r, _ in cells), min(c for _, c in cells))


# ----- episodes -----


@pytest.mark.parametrize(("difficulty", "seeds"), [("easy", 30), ("medium", 20), ("hard", 6)])
def test_the_oracle_wins_every_seed_one_piece_a_turn(difficulty, seeds):
    env = build_env(TARGET, difficulty=difficulty)
    for seed in range(seeds):
        _, info = env.reset(seed=seed)
        assert env.distance_to_goal() == info["optimal_placements"] == env.config.pieces
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["steps"] == end["placements"] == env.config.pieces
        assert end["removals"] == 0 and env.distance_to_goal() == 0


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(40))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(8))
    assert hard < easy <= 0.6 and hard == 0.0


def test_the_levels_are_partitions_of_their_region_as_the_presets_say():
    for difficulty in ("easy", "medium", "hard"):
        env = build_env(TARGET, difficulty=difficulty)
        mirrored_any = False
        for seed in range(6):
            env.reset(seed=seed)
            level, cfg = env.level, env.config
            cells = [c for part in level.solution for c in part]
            assert sorted(cells) == list(level.region) and len(level.solution) == cfg.pieces
            assert all(cfg.min_size <= len(part) <= cfg.max_size for part in level.solution)
            for shape, part in zip(level.pieces, level.solution, strict=True):
                assert normalized(part) in orientations(shape, cfg.mirror)
                mirrored_any |= normalized(part) not in orientations(shape, False)
            if cfg.shape == "rectangle":
                assert len(level.region) == level.rows * level.cols
            assert _connected(set(level.region))
        assert mirrored_any == (difficulty == "hard")  # hard shows pieces that fit only mirrored


def _connected(cells: set) -> bool:
    seen, stack = set(), [min(cells)]
    while stack:
        r, c = stack.pop()
        if (r, c) in cells and (r, c) not in seen:
            seen.add((r, c))
            stack += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
    return seen == cells


def test_refused_and_malformed_actions_change_nothing():
    env = build_env(TARGET, render_mode="text")
    env.reset(seed=0)
    key = env.state_key()
    for reply, valid_format in (
        ("<answer>piece Q, rotate 0, at row 1 col 1</answer>", True),
        ("<answer>piece B, rotate 0, at row 1 col 1</answer>", True),  # (1,1) is outside the region
        ("<answer>piece B, mirror, rotate 0, at row 1 col 3</answer>", True),
        ("<answer>remove B</answer>", True),
        ("<answer>B</answer>", False),
    ):
        obs, done, step = env.step(reply)
        assert not done and not step.metrics["action_valid"] and step.metrics["format_valid"] is valid_format
        assert env.state_key() == key and ("Not played:" in obs.text) is valid_format
    obs, _, step = env.step("<answer>piece B, rotate 0, at row 1 col 3</answer>")
    assert step.metrics["action_valid"] and "it covers (1,3) (1,4) (2,3) (2,4)" in obs.text
    assert "1 # # B B . ." in obs.text and "B (placed):" in obs.text


def test_one_position_by_two_paths_is_one_state():
    a = "<answer>piece A, rotate 180, at row 1 col 5</answer>"
    b = "<answer>piece B, rotate 0, at row 1 col 3</answer>"
    first, second = build_env(TARGET), build_env(TARGET)
    first.reset(seed=0)
    second.reset(seed=0)
    for reply in (a, b):
        first.step(reply)
    for reply in (b, a, "<answer>remove A</answer>", a):
        second.step(reply)
    assert first.state_text() == second.state_text() and first.state_key() == second.state_key()
    assert first.distance_to_goal() == second.distance_to_goal() == 3


def test_the_picture_puts_each_placed_cell_under_its_row_and_column_numbers():
    env = build_env(TARGET, cell_size=40)
    env.reset(seed=0)
    image = env.step("<answer>piece E, rotate 270, at row 5 col 3</answer>")[0].images[0]
    label = 40 * 3 // 4  # the margin of the row and column numbers
    for r, c in env.placed[4]:
        x, y = label + c * 40 + 5, label + r * 40 + 5  # near the cell's top-left corner, off its letter
        assert image.getpixel((x, y)) == COLORS[4]
    assert image.getpixel((label + 5, label + 5)) == (200, 200, 200)  # (1,1) is outside the region


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "render_mode": "vision+text"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 5)


def test_hostile_replies_check_env_and_config_errors():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="easy", removals=False))
    for bad in ({"pieces": 13}, {"min_size": 5, "max_size": 4}, {"shape": "circle"}, {"mirror": 1}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
    assert build_env(TARGET, difficulty="hard").config.turn_limit == 16


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
