"""Falling blocks: pieces and the drop against rules written again from the prompt, the lower bound and the
solver against a breadth-first search, levels built around a plan of the fewest placements, oracle and
random play, answers and impossible drops, losing by topping out or running out of pieces, the distance,
views, seed-exactness across processes, hostile replies, presets and config."""

from __future__ import annotations

import random

import numpy as np
import pytest
from falling_blocks_rules import cells, drop, fewest_placements, from_rows
from puzzle_helpers import assert_hostile_never_raise, assert_seed_exact, play, success_rate

from vlm_envs.envs.falling_blocks import (
    FallingBlocksConfig,
    LevelSpec,
    Solver,
    fewest_placements_bound,
    generate_level,
)
from vlm_envs.envs.falling_blocks.actions import parse_drop
from vlm_envs.envs.falling_blocks.pieces import PIECES, bag_sequence, distinct_rotations, shape
from vlm_envs.envs.falling_blocks.well import column_heights
from vlm_envs.envs.falling_blocks.well import drop as env_drop
from vlm_envs.registry import build_env
from vlm_envs.state_signals import UNREACHABLE

TARGET = "vlm_envs.envs.falling_blocks"
FULL6, FULL10 = 0b111111, 0b1111111111


def picture_cells(piece: str, rotation: int) -> frozenset:
    """The env's picture of a rotation as (column, row from the bottom) cells."""
    rows = shape(piece, rotation).picture
    return frozenset(
        (x, len(rows) - 1 - r) for r, line in enumerate(rows) for x, ch in enumerate(line) if ch == "#"
    )


@pytest.mark.parametrize("piece", list(PIECES))
def test_each_rotation_is_the_piece_turned_clockwise(piece):
    for rotation in range(4):
        assert picture_cells(piece, rotation) == cells(piece, rotation) and len(cells(piece, rotation)) == 4
    assert shape("T", 1).picture == ("#.", "##", "#.")  # rotate 1 of the T points right
    assert len(distinct_rotations(piece)) == {"O": 1, "I": 2, "S": 2, "Z": 2}.get(piece, 4)


def random_board(rng: random.Random, width: int, height: int, drops: int) -> tuple[int, ...]:
    """A board made by random drops (the env's own rules, checked against the rules module below)."""
    board: tuple[int, ...] = ()
    for _ in range(drops):
        turned = shape(rng.choice(PIECES), rng.randrange(4))
        result = env_drop(
            board,
            turned,
            rng.randrange(width - turned.width + 1),
            width,
            height,
            column_heights(board, width),
        )
        if not result.topped_out:
            board = result.board
    return board


def test_the_drop_matches_a_piece_falling_one_row_at_a_time():
    rng = random.Random(0)
    for _ in range(300):
        width, height = rng.choice([(4, 6), (6, 8), (10, 12)])
        board = random_board(rng, width, height, rng.randrange(12))
        piece, rotation = rng.choice(PIECES), rng.randrange(4)
        turned = shape(piece, rotation)
        column = rng.randrange(width - turned.width + 1)
        mine = env_drop(board, turned, column, width, height, column_heights(board, width))
        after, (low, _), cleared, out = drop(from_rows(board), piece, rotation, column, width, height)
        assert mine.topped_out == out
        if not out:
            assert from_rows(mine.board) == after and mine.cleared == len(cleared) and mine.row == low


def test_a_piece_does_not_slide_under_an_overhang_and_full_rows_clear():
    # row 1: .#.### (columns 1 and 3 empty); row 2: ##.... : column 1 is covered, column 3 is open
    board = (0b111010, 0b000011)
    upright = shape("I", 1)
    result = env_drop(board, upright, 0, 6, 8, column_heights(board, 6))  # column 1: it rests on row 2
    assert result.row == 2 and result.cleared == 0 and result.board[0] == 0b111010
    result = env_drop(board, upright, 2, 6, 8, column_heights(board, 6))  # column 3: into the hole
    assert result.row == 0 and result.cleared == 0  # column 1 of row 1 is still empty
    flat = (0b110111, 0b000001)
    result = env_drop(flat, shape("T", 2), 2, 6, 8, column_heights(flat, 6))  # the T points down into row 1
    assert result.cleared == 1 and result.board == (0b011101,)  # row 2 and the T's top moved down
    tall = (FULL6 & ~1,) * 5
    assert env_drop(tall, upright, 1, 6, 8, column_heights(tall, 6)).topped_out  # rows 6 to 9 of 8


def test_bags_hold_each_piece_once():
    sequence = bag_sequence(70, np.random.default_rng(3))
    assert all(sorted(sequence[i : i + 7]) == sorted(PIECES) for i in range(0, 70, 7))


def test_the_bound_never_exceeds_and_the_solver_equals_a_breadth_first_search():
    rng = random.Random(1)
    for _ in range(60):
        width, height = rng.choice([(4, 6), (5, 8), (6, 8)])
        board = random_board(rng, width, height, rng.randrange(7))
        sequence = "".join(rng.choice(PIECES) for _ in range(3))
        lines = rng.randint(1, 3)
        fewest = fewest_placements(from_rows(board), sequence, lines, width, height, 3)
        found = Solver(width, height, sequence).solve(board, 0, lines, 10**6)
        assert found.complete and (None if found.plan is None else len(found.plan)) == fewest
        if fewest is not None:
            assert fewest_placements_bound(board, lines, width) <= fewest


def test_rows_under_covered_cells_raise_the_bound():
    # three rows, each hole under a cell of the row above: they clear one after another
    staggered = (FULL10 & ~0b100, FULL10 & ~0b010, FULL10 & ~0b001)
    assert fewest_placements_bound(staggered, 3, 10) == 3
    # the same holes one above another: an upright I fills all three at once
    aligned = (FULL10 & ~1,) * 3
    assert fewest_placements_bound(aligned, 3, 10) == 1
    assert Solver(10, 8, "I").solve(aligned, 0, 3, 100).plan == ((1, 0),)


@pytest.mark.parametrize("level", ["easy", "medium", "hard"])
def test_levels_are_built_around_a_plan_of_the_fewest_placements(level):
    spec = FallingBlocksConfig(difficulty=level).level_spec()
    for seed in range(20):
        made = generate_level(spec, seed)
        assert made.optimal_exact and len(made.plan) <= spec.lines <= len(made.sequence) == spec.pieces
        full = (1 << spec.width) - 1
        assert len(made.board) == spec.garbage_rows and all(0 < row < full for row in made.board)
        filled, cleared = from_rows(made.board), 0
        for index, (rotation, column) in enumerate(made.plan):
            assert cleared < spec.lines  # the plan stops at the drop that clears the last line
            filled, _, rows, out = drop(
                filled, made.sequence[index], rotation, column, spec.width, spec.depth
            )
            assert not out
            cleared += len(rows)
        assert cleared >= spec.lines
        if spec.width <= 6:  # no fewer drops clear them (every placement tried)
            assert fewest_placements(
                from_rows(made.board), made.sequence, spec.lines, spec.width, spec.depth, 3
            ) == len(made.plan)
    assert generate_level(spec, 7) == generate_level.__wrapped__(spec, 7)


@pytest.mark.parametrize(
    ("config", "seeds"), [({"difficulty": "easy"}, 200), ({}, 200), ({"difficulty": "hard"}, 100)]
)
def test_the_oracle_wins_every_seed_in_the_fewest_placements(config, seeds):
    env = build_env(TARGET, **config)
    for seed in range(seeds):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0
        assert end["pieces_placed"] == end["optimal_placements"] == end["steps"]


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    assert 0.05 <= easy <= 0.5
    assert success_rate(TARGET, {"difficulty": "hard"}, "random", range(100)) < easy


def test_answers_name_a_rotation_and_a_column():
    assert parse_drop("<answer>rotate 1, column 4</answer>")[:2] == (1, 4)
    assert parse_drop("<answer> Column: 10 ; ROTATION=3 </answer>")[:2] == (3, 10)
    assert parse_drop("<answer>rot 0 col 2.</answer>")[:2] == (0, 2)
    for reply, says in [
        ("<answer>rotate 1</answer>", "give one column"),
        ("<answer>rotate 1, rotate 2, column 3</answer>", "give one rotation"),
        ("<answer>rotate 1, column 4 please</answer>", "'please' is not part of a drop"),
        ("<answer>rotate ٣, column 4</answer>", "give one rotation"),
        ("<answer>rotate 1, column 99999</answer>", "too long a number"),
        ("drop it at 4", "no <answer>"),
    ]:
        assert says in parse_drop(reply).error


def test_an_impossible_drop_costs_the_turn_and_changes_nothing():
    env = build_env(TARGET, render_mode="text")
    env.reset(seed=0)  # an O: two columns wide at every rotation
    key, distance = env.state_key(), env.distance_to_goal()
    for reply, says in [
        ("<answer>rotate 4, column 1</answer>", "rotate 4 is not a rotation (0 to 3)"),
        (
            "<answer>rotate 0, column 8</answer>",
            "it is 2 columns wide, so its leftmost cell goes in column 1 to 7",
        ),
        ("<answer>rotate 0, column 0</answer>", "outside the well"),
    ]:
        obs, done, step = env.step(reply)
        assert says in obs.text and "No piece was dropped this turn" in obs.text and not done
        assert step.metrics["format_valid"] is True and step.metrics["action_valid"] is False
        assert (env.state_key(), env.distance_to_goal()) == (key, distance)
    obs, _, step = env.step("rotate 0, column 1")
    assert step.metrics["format_valid"] is False and "Turns left: 4." in obs.text


def test_a_drop_says_where_the_piece_came_to_rest_and_what_it_cleared():
    env = build_env(TARGET, render_mode="vision+text")
    obs, info = env.reset(seed=0)
    board, cfg = env._ep.board, env.config
    assert info["well"] in obs.text and f"Now: {info['sequence'][0]}" in obs.text
    after, (low, high), cleared, _ = drop(from_rows(board), info["sequence"][0], 0, 0, cfg.width, cfg.height)
    obs, _, step = env.step("<answer>rotate 0, column 1</answer>")
    said = f"it came to rest on rows {low + 1} to {high + 1} and cleared {len(cleared)} line"
    assert said in obs.text and from_rows(env._ep.board) == after
    assert step.metrics["lines_cleared"] == len(cleared) and step.metrics["pieces_placed"] == 1


def test_topping_out_loses_and_the_goal_is_then_unreachable():
    env = build_env(TARGET, height=6, garbage_rows=2, lines=1, pieces=20)
    env.reset(seed=0)
    done = False
    while not done:  # every piece upright against the left wall
        obs, done, step = env.step("<answer>rotate 1, column 1</answer>")
    assert step.metrics["topped_out"] is True and step.terminated and env.episode_reward() == 0.0
    assert "Topped out" in obs.text and "Topped out" in env.state_text()
    assert env.distance_to_goal() == UNREACHABLE


def test_running_out_of_pieces_loses():
    env = build_env(TARGET, difficulty="easy", pieces=1)
    env.reset(seed=0)
    wrong = next(
        r
        for r in ("<answer>rotate 0, column 5</answer>", "<answer>rotate 1, column 1</answer>")
        if r != env.oracle_response()
    )
    obs, done, step = env.step(wrong)
    assert done and step.terminated and step.metrics["success"] is False
    assert "No pieces are left" in obs.text and env.distance_to_goal() == UNREACHABLE


def test_the_distance_is_the_fewest_placements_and_each_oracle_drop_lowers_it():
    env = build_env(TARGET, difficulty="easy", pieces=3)
    for seed in range(6):
        _, info = env.reset(seed=seed)
        ep, cfg = env._ep, env.config
        assert (
            env.distance_to_goal()
            == info["optimal_placements"]
            == fewest_placements(from_rows(ep.board), ep.coming, cfg.lines, cfg.width, cfg.height, 3)
        )
        rng = random.Random(seed)
        env.step(env.random_response(rng))  # off the plan: the solver's distance
        if not env._ep.done:
            ep = env._ep
            fewest = fewest_placements(
                from_rows(ep.board), ep.coming, ep.lines_left, cfg.width, cfg.height, 3
            )
            assert env.distance_to_goal() == (UNREACHABLE if fewest is None else fewest)


def test_one_rotation_named_two_ways_is_one_state():
    env = build_env(TARGET)
    env.reset(seed=0)  # an O: every rotation is the same
    env.step("<answer>rotate 2, column 3</answer>")
    key = env.state_key()
    env.reset(seed=0)
    env.step("<answer>rotate 0, column 3</answer>")
    assert env.state_key() == key and "Pieces to come, the current one first: Z I L" in env.state_text()


def test_the_image_grows_with_the_well_and_shows_the_current_piece():
    small = build_env(TARGET, difficulty="easy").reset(seed=0)[0].images[0]
    large = build_env(TARGET, difficulty="hard").reset(seed=0)[0].images[0]
    assert large.width > small.width and large.height > small.height
    env = build_env(TARGET, preview=0)
    image = np.asarray(env.reset(seed=0)[0].images[0])
    assert (image == (236, 200, 50)).all(axis=2).any()  # the O's yellow
    assert "Next:" not in env.reset(seed=0)[0].text


@pytest.mark.parametrize("config", [{}, {"render_mode": "vision+text", "difficulty": "hard"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 5)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, render_mode="vision+text"), 2)


def test_presets_grow_the_well_the_garbage_and_the_lines_and_an_explicit_knob_wins():
    levels = [FallingBlocksConfig(difficulty=level) for level in ("easy", "medium", "hard")]
    for knob in ("width", "garbage_rows", "lines"):
        values = [getattr(c, knob) for c in levels]
        assert values == sorted(values) and values[0] < values[-1]
    assert FallingBlocksConfig(difficulty="hard", lines=2).lines == 2
    assert FallingBlocksConfig(pieces=5).turn_limit == 5 and FallingBlocksConfig(max_turns=3).turn_limit == 3


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"height": 8, "garbage_rows": 5}, "leaves fewer than 4 free rows"),
        ({"garbage_rows": 2, "lines": 3}, "lines 3 exceeds garbage_rows 2"),
        ({"width": 6, "lines": 4, "garbage_rows": 4}, "exceeds half the width (3)"),
        ({"lines": 2, "pieces": 1}, "pieces 1 is fewer than lines 2"),
        ({"width": 11}, "less than or equal to 10"),
        ({"preview": 6}, "less than or equal to 5"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        build_env(TARGET, **config)


def test_a_spec_is_what_the_config_says():
    cfg = FallingBlocksConfig(width=9, height=15, garbage_rows=5, lines=3, pieces=11)
    assert cfg.level_spec() == LevelSpec(9, 15, 5, 3, 11)
