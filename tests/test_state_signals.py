"""The state signals' contract: ``None`` by default (a third-party env keeps working), the key a digest of
the class and the text, the helpers that count turns, the checked read the rollout makes, and what an
optimal turn is."""

from __future__ import annotations

import pytest
from toyenvs.colors import ColorsEnv, StatedColorsEnv

from vlm_envs.state_signals import (
    UNREACHABLE,
    Standing,
    StateSignals,
    action_optimal,
    answer_distance,
    standing_of,
    state_digest,
    turns_for,
)


def test_an_env_that_says_nothing_gives_none_for_all_three():
    env = ColorsEnv()
    env.reset(seed=0)
    assert (env.state_key(), env.state_text(), env.distance_to_goal()) == (None, None, None)


def test_the_default_key_is_a_digest_of_the_class_and_the_text():
    env = StatedColorsEnv()
    assert env.state_key() is None  # no text before reset: no key
    env.reset(seed=0)
    key = env.state_key()
    assert key == state_digest("toyenvs.colors:StatedColorsEnv", env.state_text())
    assert key.startswith("sha256:") and len(key) == 7 + 64
    assert state_digest("toyenvs.colors:ColorsEnv", env.state_text()) != key  # another env, another key


def test_a_wrong_answer_that_may_be_retried_keeps_the_key_and_a_right_one_changes_it():
    env = StatedColorsEnv()
    env.reset(seed=0)
    key, color = env.state_key(), env.state_text().split()[1]
    wrong = next(c for c in ("red", "green", "blue") if c != color)
    env.step(f"<answer>{wrong}</answer>")
    assert env.state_key() == key and env.distance_to_goal() == 1
    env.step(f"<answer>{color}</answer>")
    assert env.state_key() != key and env.distance_to_goal() == 0


def test_turns_for_rounds_up_and_answer_distance_tells_solved_lost_and_open_apart():
    assert [turns_for(n, 3) for n in (0, 1, 3, 4, 7)] == [0, 1, 1, 2, 3]
    assert answer_distance(True, lost=True) == 0
    assert answer_distance(False, lost=True) == UNREACHABLE == -1
    assert answer_distance(False, lost=False, to_answer=2) == 2


class _Says(StateSignals):
    def __init__(self, key: object, distance: object) -> None:
        self.key, self.distance = key, distance

    def state_key(self) -> object:  # type: ignore[override]
        return self.key

    def distance_to_goal(self) -> object:  # type: ignore[override]
        return self.distance


def test_standing_of_checks_what_the_env_says() -> None:
    assert standing_of(_Says("k", 3)) == Standing("k", 3)
    assert standing_of(_Says(None, UNREACHABLE)) == Standing(None, UNREACHABLE)
    for key, distance, error in [
        (b"k", 1, TypeError),
        ("k", True, TypeError),
        ("k", 1.0, TypeError),
        ("k", -2, ValueError),
    ]:
        with pytest.raises(error):
            standing_of(_Says(key, distance))


def test_action_optimal_is_one_turn_nearer() -> None:
    assert action_optimal(3, 2) is True
    assert action_optimal(3, 3) is False and action_optimal(3, 1) is False
    assert action_optimal(1, UNREACHABLE) is False
    assert action_optimal(0, 0) is None and action_optimal(UNREACHABLE, 2) is None
    assert action_optimal(None, 1) is None and action_optimal(2, None) is None
