"""Clock: the dial's hands point where the time says (read back from the pixels), answers in every
spelling, right and wrong replies, later questions, oracle and random play, seed-exactness across
processes, hostile replies, presets and config."""

from __future__ import annotations

import math

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.envs.clock import ClockConfig, clock_image, parse_time, spoken
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.clock"


def ink_at(image: np.ndarray, turn: float, radius_share: float) -> float:
    """How dark the dial is at ``turn`` (0 = 12 o'clock, clockwise) and ``radius_share`` of its radius."""
    size = image.shape[0]
    c, r = size / 2, size / 2 - size / 40
    x = c + radius_share * r * math.sin(2 * math.pi * turn)
    y = c - radius_share * r * math.cos(2 * math.pi * turn)
    return 255 - float(image[int(y), int(x)].mean())


def turn_gap(a: float, b: float) -> float:
    return min((a - b) % 1, (b - a) % 1)


@pytest.mark.parametrize("minutes", [0, 7, 185, 359, 412, 599, 719])
def test_the_hands_point_at_the_time(minutes):
    """Read back from the pixels: past the hour hand's length only the minute hand is dark, and it is
    darkest at the minute's angle; nearer the centre the hour hand is dark at the hour's angle."""
    image = np.asarray(clock_image(minutes, None, "none", 0, 336)).astype(float)
    minute_turn, hour_turn = (minutes % 60) / 60, minutes / 720
    ring = [ink_at(image, k / 240, 0.65) for k in range(240)]
    assert turn_gap(int(np.argmax(ring)) / 240, minute_turn) <= 1 / 120
    assert ink_at(image, hour_turn, 0.3) > 200
    for off in (
        -1 / 12,
        1 / 12,
    ):  # 30 degrees to either side the dial is bare, unless the minute hand is there
        if turn_gap(hour_turn + off, minute_turn) > 0.03:
            assert ink_at(image, hour_turn + off, 0.3) < 30


@pytest.mark.parametrize(
    ("reply", "minutes"),
    [
        ("<answer>3:45</answer>", 225),
        ("<answer> 03:45 </answer>", 225),
        ("<answer>15:45</answer>", 225),
        ("<answer>3:45 pm</answer>", 225),
        ("<answer>12:05 a.m.</answer>", 5),
        ("<answer>0:05</answer>", 5),
        ("<answer>3.45</answer>", 225),
        ("<answer>3h45</answer>", 225),
    ],
)
def test_answers_read_as_twelve_hour_times(reply, minutes):
    assert parse_time(reply) == (minutes, None)


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("<answer>quarter to four</answer>", "is not a time"),
        ("<answer>3:75</answer>", "3:75 is not a time of day"),
        ("<answer>25:00</answer>", "not a time of day"),
        ("<answer>15:00 pm</answer>", "not a time of day"),
        ("3:45", "no <answer>"),
    ],
)
def test_other_answers_are_format_errors(reply, says):
    assert says in parse_time(reply).error


def test_a_wrong_time_is_not_revealed_and_the_second_try_can_win():
    env = build_env(TARGET)
    _, info = env.reset(seed=4)
    wrong = "1:00" if info["time"] != "1:00" else "2:00"
    obs, done, step = env.step(f"<answer>{wrong}</answer>")
    assert not done and "is not right" in obs.text and info["time"] not in obs.text and step.reward == 0.0
    assert step.metrics["minutes_off"] > 0 and step.info["answer"] is None
    obs, done, step = env.step(f"<answer>{info['time']}</answer>")
    assert done and step.terminated and step.reward == 1.0 and step.metrics["success"] is True
    env.reset(seed=4)
    env.step("<answer>noon</answer>")
    _, done, step = env.step(f"<answer>{wrong}</answer>")
    assert (
        done and step.truncated and step.metrics["success"] is False and step.info["answer"] == info["time"]
    )


def test_later_questions_ask_the_time_some_minutes_on():
    env = build_env(TARGET, question="later", max_later=300)
    for seed in range(50):
        obs, info = env.reset(seed=seed)
        assert f"{info['later_minutes']} minutes from now" in obs.text and 1 <= info["later_minutes"] <= 300
        hour, minute = map(int, info["time"].split(":"))
        assert info["answer"] == spoken(hour % 12 * 60 + minute + info["later_minutes"])


@pytest.mark.parametrize(
    "config", [{}, {"difficulty": "easy"}, {"difficulty": "medium"}, {"difficulty": "hard"}]
)
def test_oracle_wins_200_seeds_at_the_first_reply(config):
    env = build_env(TARGET, **config)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0 and end["steps"] == 1


def test_random_baseline_is_near_zero_and_the_times_vary():
    assert success_rate(TARGET, {}, "random", range(100)) <= 0.03  # 2 tries of 720 times: about 0.3%
    env = build_env(TARGET, difficulty="easy", image_size=96)
    times = {env.reset(seed=s)[1]["time"] for s in range(100)}
    assert len(times) > 60 and all(int(t[-2:]) % 5 == 0 for t in times)


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "question": "any", "numerals": "any"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, difficulty="hard"), 3)


def test_presets_go_from_five_minute_steps_with_numerals_to_later_questions_on_a_bare_dial():
    easy, hard = ClockConfig(difficulty="easy"), ClockConfig(difficulty="hard")
    assert (easy.minute_step, easy.numerals, easy.second_hand) == (5, "arabic", False)
    assert (hard.minute_step, hard.numerals, hard.question) == (1, "none", "later")
    assert ClockConfig(difficulty="hard", numerals="roman").numerals == "roman"


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"minute_step": 7}, "must divide 60"),
        ({"minute_step": 30, "max_later": 20}, "below minute_step"),
        ({"image_size": 64}, "greater than or equal to 96"),
        ({"numerals": "greek"}, "'arabic', 'roman', 'none' or 'any'"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=says):
        build_env(TARGET, **config)
