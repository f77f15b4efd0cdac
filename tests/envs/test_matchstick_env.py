"""Matchstick: one-stick moves by an independent count of sticks, puzzles false and one move from a true
equation, the oracle winning every seed per difficulty, answers judged by both rules, seed-exactness
across processes, hostile replies."""

from __future__ import annotations

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.matchstick import Equation, moves, one_move_away
from vlm_envs.envs.matchstick.equation import parse
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.matchstick"
#: Sticks per symbol, counted on a seven-segment display (independent of the env's segment table).
STICKS = {"0": 6, "1": 2, "2": 5, "3": 5, "4": 4, "5": 5, "6": 6, "7": 3, "8": 7, "9": 6, "+": 2, "-": 1}


def total(equation: Equation) -> int:
    return sum(STICKS[s] for s in equation.symbols)


def test_a_move_keeps_the_number_of_sticks_and_known_puzzles_have_their_answers():
    start = Equation("5", "+", "3", "8")
    found = {str(m) for m in moves(start)}
    assert {"6 + 3 = 9", "9 - 3 = 8", "3 + 3 = 8", "9 + 3 = 6"} <= found  # within a symbol and across
    assert all(total(parse(m)) == total(start) for m in found)
    assert "5 + 3 = 8" not in found and "5 + 3 = 9" not in found  # that one only takes a stick away
    assert (
        one_move_away(Equation("6", "+", "4", "4"), Equation("0", "+", "4", "4")) is True
    )  # 6 -> 0 in place
    assert one_move_away(Equation("1", "+", "1", "2"), Equation("11", "+", "1", "2")) is False  # other layout


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_every_puzzle_is_false_one_move_from_a_true_equation_and_the_oracle_wins(difficulty):
    env = build_env(TARGET, difficulty=difficulty)
    for seed in range(200):
        _, info = env.reset(seed=seed)
        shown, truth = parse(info["equation"]), parse(info["solution"])
        assert not shown.true and truth.true and one_move_away(shown, truth)
        assert total(shown) == total(truth) and info["sticks"] == total(shown) + 2
        assert play(env, seed, "oracle")["success"] is True


def test_presets_set_the_numbers_and_operators():
    easy = build_env(TARGET, difficulty="easy")
    assert all("+" in easy.reset(seed=s)[1]["solution"] for s in range(30))
    hard = build_env(TARGET, difficulty="hard")
    assert any(len(hard.reset(seed=s)[1]["solution"].split()[0]) == 2 for s in range(30))


def test_an_answer_must_be_true_and_one_move_away():
    env = build_env(TARGET, max_turns=5)
    _, info = env.reset(seed=1)
    shown = parse(info["equation"])
    false_move = next(m for m in moves(shown) if not m.true)
    obs, done, step = env.step(f"<answer>{false_move}</answer>")
    assert not done and step.metrics["one_move"] and not step.metrics["equation_true"]
    assert "equation is false" in obs.text
    obs, done, step = env.step("<answer>1 + 1 = 2</answer>")  # true, but not one move from the shown one
    assert not done and step.metrics["equation_true"] and not step.metrics["one_move"]
    obs, done, step = env.step("<answer>one plus one</answer>")
    assert not done and step.metrics["format_valid"] is False
    obs, done, step = env.step(env.oracle_response())
    assert done and step.terminated and env.episode_reward() == 1.0


def test_random_play_is_below_the_oracle_and_lower_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(100))
    assert hard < easy < 1.0


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "stick_px": 20}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_check_env_and_config_errors():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="hard"))
    for bad in ({"digits": 4}, {"operators": "*"}, {"stick_px": 4}, {"difficulty": "expert"}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)


def test_answers_run_out_at_the_turn_cap():
    env = build_env(TARGET, max_turns=2)
    env.reset(seed=0)
    assert env.step("no answer")[1] is False
    obs, done, info = env.step("<answer>0 + 0 = 0</answer>")
    assert done and info.truncated and info.metrics["success"] is False and "no answers are left" in obs.text
