"""RushHour: solvable levels whose recorded optimum matches an independent BFS, the oracle winning every
seed per difficulty in that many moves, move rules, seed-exactness across processes, parsing, hostile
replies."""

from __future__ import annotations

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)
from rationale_truth import moves_to_exit

from vlm_envs.checker import check_env
from vlm_envs.envs.rush_hour.actions import parse_moves
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.rush_hour"


def board_rows(text: str) -> tuple[str, ...]:
    return tuple(line.rstrip(" >").replace(" ", "") for line in text.splitlines())


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_the_recorded_optimum_is_an_independent_bfs_and_within_the_preset(difficulty):
    env = build_env(TARGET, difficulty=difficulty)
    low, high = env.config.min_moves, env.config.max_moves
    within = 0
    for seed in range(8):
        _, info = env.reset(seed=seed)
        assert info["optimal_moves"] == moves_to_exit(board_rows(info["board"]), 6)
        assert 1 <= info["optimal_moves"] <= high
        within += info["optimal_moves"] >= low  # shallower only when the search budget ran out
    assert within >= 6


@pytest.mark.parametrize(("difficulty", "seeds"), [("easy", 40), ("medium", 30), ("hard", 10)])
def test_the_oracle_wins_every_seed_in_the_fewest_moves(difficulty, seeds):
    env = build_env(TARGET, difficulty=difficulty)
    for seed in range(seeds):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["moves"] == end["optimal_moves"] and end["moves_to_solve"] == 0


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(30))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(10))
    assert hard < easy <= 0.3 and hard <= 0.05


def test_impossible_moves_are_skipped_and_the_rest_played():
    env = build_env(TARGET, render_mode="text", max_actions_per_turn=4)
    _, info = env.reset(seed=3)
    rows = board_rows(info["board"])
    flat = next(ch for ch in "ABCDEFGHIJKLMNOP" if any(ch * 2 in row for row in rows))  # a horizontal one
    reply = env.oracle_response().removeprefix("<answer>").removesuffix("</answer>")
    obs, _, step = env.step(f"<answer>{flat} up 1, Z left 1, X right 9, {reply.split(', ')[0]}</answer>")
    assert step.metrics["format_valid"] and not step.metrics["action_valid"] and step.metrics["moves"] == 1
    assert "3 of your moves were not possible" in obs.text
    assert step.metrics["moves_to_solve"] == info["optimal_moves"] - 1


def test_parse_moves_spellings_and_errors():
    assert parse_moves("<answer>b Down 2; X r\nA-up 1</answer>", 3).moves == (
        (2, "down", 2),
        (0, "right", 1),
        (1, "up", 1),
    )
    assert "at most 2" in parse_moves("<answer>A up, B up, C up</answer>", 2).error
    assert "not a move" in parse_moves("<answer>A sideways 2</answer>", 2).error
    assert "?" in parse_moves("<answer><image></answer>", 2).error


@pytest.mark.parametrize("config", [{}, {"render_mode": "vision+text", "difficulty": "easy"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_check_env_and_config_errors():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="easy"))
    for bad in ({"size": 9}, {"min_moves": 5, "max_moves": 4}, {"vehicles": 0}, {"difficulty": "expert"}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)


def test_a_board_with_the_red_car_alone_is_one_move():
    env = build_env(TARGET, vehicles=1, min_moves=1, max_moves=1)
    _, info = env.reset(seed=0)
    assert info["vehicles"] == 1 and info["optimal_moves"] == 1
    assert play(env, 0, "oracle")["success"] is True


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
