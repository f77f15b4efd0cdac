"""Generated levels: solvable at their recorded optimal length, difficulty honoured, seed-exact."""

import os
import re
import subprocess
import sys

import pytest

from vlm_envs.envs.sokoban import Difficulty, generate_level, generator
from vlm_envs.envs.sokoban.board import is_solved, replay, to_ascii
from vlm_envs.envs.sokoban.generator import MAX_SEARCH_WORK, GenerationError, node_cost
from vlm_envs.envs.sokoban.solver import Solver

SWEEP = [(5, 5, 1), (6, 6, 1), (6, 6, 2), (7, 9, 2), (8, 8, 3), (10, 10, 3)]


@pytest.mark.parametrize(("rows", "cols", "boxes"), SWEEP)
def test_sweep_levels_are_solved_at_their_recorded_optimum(rows, cols, boxes):
    spec = Difficulty(rows=rows, cols=cols, num_boxes=boxes)
    for seed in range(4):
        level = generate_level(spec, seed)
        layout, start = level.layout, level.state
        assert (layout.rows, layout.cols) == (rows, cols)
        assert len(start.boxes) == len(layout.targets) == boxes
        assert not any(b in layout.targets for b in start.boxes), "a box starts on a target"
        assert len(level.solution) == level.optimal_moves >= 1
        assert is_solved(layout, replay(layout, start, level.solution))
        assert level.optimal_exact
        again = Solver(layout).solve(start, max_nodes=200_000)
        assert again.complete and len(again.moves) == level.optimal_moves, to_ascii(layout, start)


def test_move_range_is_honoured():
    spec = Difficulty(rows=8, cols=8, num_boxes=2, min_moves=15, max_moves=22)
    lengths = [generate_level(spec, seed).optimal_moves for seed in range(8)]
    assert all(15 <= n <= 22 for n in lengths)


def test_the_search_of_one_level_is_bounded_and_an_unmeetable_difficulty_is_a_value_error(monkeypatch):
    """Unbounded, 6 boxes on 12x12 cost 18 s (and a 64x64 board with 10 boxes 4 minutes) of solving; such
    boards are refused now, so a tenth of the budget stands in for a board past it."""
    budget = MAX_SEARCH_WORK // 10
    monkeypatch.setattr(generator, "MAX_SEARCH_WORK", budget)
    spent = []
    solve = Solver.solve

    def counted(self, *args, **kwargs):
        result = solve(self, *args, **kwargs)
        spent.append(result.nodes)
        return result

    monkeypatch.setattr(Solver, "solve", counted)
    spec = Difficulty(rows=10, cols=10, num_boxes=3, min_moves=30)
    level = generate_level(spec, 0)
    assert is_solved(level.layout, replay(level.layout, level.state, level.solution))
    cost = node_cost(10, 10, 3)
    assert sum(spent) * cost <= budget + cost * len(spent)  # each solve may pass by one node
    assert not level.optimal_exact  # too big to search exactly within the budget: an upper bound
    assert issubclass(GenerationError, ValueError)  # a difficulty no level meets is a config error


def test_impossible_range_raises_a_clear_error():
    spec = Difficulty(rows=5, cols=5, num_boxes=1, min_moves=400, max_attempts=3)
    with pytest.raises(GenerationError, match="widen the move range"):
        generate_level(spec, 0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rows": 3, "cols": 3, "num_boxes": 2},
        {"num_boxes": 0},
        {"wall_fraction": 1.0},
        {"min_moves": 9, "max_moves": 3},
        {"rows": 65},
        {"cols": 10**9},
        {"rows": 64, "cols": 64, "num_boxes": 5},
    ],
)
def test_bad_difficulty_is_rejected(kwargs):
    with pytest.raises(ValueError):
        Difficulty(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rows": 30, "cols": 30, "num_boxes": 3}, "627 floor cells; 3 box(es) allow at most 53"),
        ({"rows": 10, "cols": 10, "num_boxes": 3, "wall_fraction": 0.0}, "64 floor cells; 3 box(es) allow"),
        ({"rows": 24, "cols": 24, "num_boxes": 2, "wall_fraction": 0.0}, "484 floor cells; 2 box(es) allow"),
        ({"rows": 5, "cols": 5, "num_boxes": 3}, "7 floor cells; 3 box(es) need at least 12"),
    ],
)
def test_boards_past_what_generates_and_solves_in_a_second_are_refused_in_one_line(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)) as err:
        Difficulty(**kwargs)
    assert "\n" not in str(err.value)


def test_wall_fraction_zero_gives_an_open_room():
    level = generate_level(Difficulty(rows=6, cols=6, num_boxes=1, wall_fraction=0.0), 0)
    assert to_ascii(level.layout, level.state).count("#") == 6 * 6 - 4 * 4


def test_player_does_not_always_start_next_to_a_box():
    spec = Difficulty(rows=8, cols=8, num_boxes=2)
    starts_apart = 0
    for seed in range(20):
        level = generate_level(spec, seed)
        neighbours = {s[level.state.player] for s in level.layout.step}
        starts_apart += not neighbours & set(level.state.boxes)
    assert starts_apart >= 3


def test_same_seed_same_level_different_seeds_differ():
    spec = Difficulty(rows=7, cols=7, num_boxes=2)
    assert generate_level(spec, 11) == generate_level(spec, 11)
    texts = {to_ascii(generate_level(spec, s).layout, generate_level(spec, s).state) for s in range(10)}
    assert len(texts) >= 9


FINGERPRINT = """
import hashlib, json, random
from vlm_envs import build_env
env = build_env("sokoban", grid_size=(8, 8), num_boxes=2, render_mode="vision+text", reward_mode="shaped")
digest = hashlib.sha256()
for seed in (0, 7, 2**40 + 3):
    obs, info = env.reset(seed=seed)
    digest.update(json.dumps(info, sort_keys=True).encode() + obs.text.encode() + obs.images[0].tobytes())
    digest.update(env.frame_png())
    rng = random.Random(seed)
    for _ in range(6):
        obs, done, step = env.step(env.random_response(rng))
        digest.update(obs.text.encode() + obs.images[0].tobytes() + env.frame_png())
        digest.update(json.dumps(step.model_dump(), sort_keys=True, default=str).encode())
        if done:
            break
print(digest.hexdigest())
"""


def test_same_episode_in_other_processes_whatever_the_hash_seed():
    digests = set()
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", FINGERPRINT],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        digests.add(out.stdout.strip())
    in_process: dict = {}
    exec(FINGERPRINT.replace("print(digest.hexdigest())", "result = digest.hexdigest()"), in_process)
    digests.add(in_process["result"])
    assert len(digests) == 1, digests


def test_levels_beyond_the_search_budget_record_a_verified_bound():
    spec = Difficulty(rows=8, cols=8, num_boxes=2, solver_max_nodes=2)
    level = generate_level(spec, 4)
    layout, start = level.layout, level.state
    assert not level.optimal_exact and level.optimal_moves == len(level.solution)
    assert is_solved(layout, replay(layout, start, level.solution))
    exact = Solver(layout).solve(start)
    assert exact.complete and len(exact.moves) <= level.optimal_moves
