"""MentalRotation: the 24 rotations, the recorded optimum against an independent search over turn
sequences, oracle and random play, mirror mode, seed-exactness across processes, hostile replies."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.mental_rotation.actions import parse_turns, parse_word
from vlm_envs.envs.mental_rotation.render import radius_of, render
from vlm_envs.envs.mental_rotation.shapes import ROTATIONS, TURNS, is_chiral, key, random_polycube
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.mental_rotation"


def test_the_24_rotations_are_distinct_proper_and_closed_under_quarter_turns():
    assert len({m.tobytes() for m in ROTATIONS}) == 24
    assert all(round(np.linalg.det(m)) == 1 and (m @ m.T == np.eye(3)).all() for m in ROTATIONS)
    seen = {m.tobytes() for m in ROTATIONS}
    assert all((t @ m).tobytes() in seen for t in TURNS.values() for m in ROTATIONS)


def fewest_turns(cubes: np.ndarray, start: np.ndarray, target_view: bytes, size: int) -> int:
    """An independent search: every sequence of up to 3 quarter-turn matrices applied to the start's
    cubes, the first length whose render is pixel-identical to the target view."""
    radius = radius_of(cubes)
    for length in range(4):
        for seq in itertools.product(TURNS.values(), repeat=length):
            m = start
            for t in seq:
                m = t @ m
            placed = cubes @ m.T
            if render(placed - placed.min(axis=0), size, radius).tobytes() == target_view:
                return length
    raise AssertionError("no sequence of 3 turns reaches the target")


def test_recorded_optimum_matches_an_independent_search():
    env = build_env(TARGET, image_size=96)
    for seed in range(25):
        obs, info = env.reset(seed=seed)
        cubes = np.array(info["cubes"])
        assert 5 <= len(cubes) <= 8 and info["optimal_turns"] >= 1
        target_view = obs.images[0].tobytes()
        start = ROTATIONS[info["orientation"]]
        assert fewest_turns(cubes, start, target_view, 96) == info["optimal_turns"]


def test_polycubes_are_connected_and_chiral_ones_occur():
    rng = np.random.default_rng(0)
    shapes = [random_polycube(int(rng.integers(5, 9)), rng) for _ in range(60)]
    for cubes in shapes:
        cells = {tuple(c) for c in cubes}
        reach, stack = set(), [next(iter(cells))]
        while stack:
            c = stack.pop()
            if c not in reach:
                reach.add(c)
                stack += [n for n in cells if sum(abs(a - b) for a, b in zip(c, n, strict=True)) == 1]
        assert reach == cells and len(key(cubes)) == len(cubes)
    assert any(is_chiral(c) for c in shapes) and not all(is_chiral(c) for c in shapes)


def test_oracle_wins_200_seeds_in_the_optimal_number_of_turns():
    env = build_env(TARGET, image_size=64)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["turns_used"] == end["optimal_turns"]


def test_random_baseline_is_far_below_the_oracle():
    assert success_rate(TARGET, {"image_size": 64}, "random", range(100)) <= 0.4  # measured 0.19


def test_mirror_mode_one_reply_with_an_exact_answer():
    env = build_env(TARGET, mode="mirror", image_size=96)
    answers = set()
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        assert len(obs.images) == 2 and is_chiral(np.array(info["cubes"]))
        answers.add(info["answer"])
        assert play(env, seed, "oracle")["reward"] == 1.0
        env.reset(seed=seed)
        wrong = "same" if info["answer"] == "mirror" else "mirror"
        _, done, step = env.step(f"<answer>{wrong}</answer>")
        assert done and step.reward == 0.0 and step.metrics["format_valid"]
    assert answers == {"same", "mirror"}
    assert 0.3 <= success_rate(TARGET, {"mode": "mirror", "image_size": 64}, "random", range(100)) <= 0.7


@pytest.mark.parametrize("config", [{}, {"mode": "mirror"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 9)


def test_symmetric_shapes_count_every_orientation_that_looks_the_same():
    bar = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0], [4, 0, 0]])
    radius = radius_of(bar)
    views = {render(bar @ m.T - (bar @ m.T).min(axis=0), 64, radius).tobytes() for m in ROTATIONS}
    assert len(views) == 3  # a straight bar lies along x, y or z: 24 orientations, 3 pictures


def test_parsers():
    assert parse_turns("<answer>x+ Y- z\u2212, (x+)</answer>", 4).turns == ("x+", "y-", "z-", "x+")
    assert "not a turn" in parse_turns("<answer>w+</answer>", 4).error
    assert "at most 2" in parse_turns("<answer>x+ x+ x+</answer>", 2).error
    assert parse_word("<answer> Mirror. </answer>") == ("mirror", None)
    assert parse_word("<answer>both</answer>")[0] is None


@pytest.mark.parametrize("config", [{}, {"mode": "mirror"}])
def test_hostile_replies_and_check_env(config):
    assert_hostile_never_raise(build_env(TARGET, image_size=64, **config), 0)
    check_env(build_env(TARGET, image_size=96, **config))


def test_config_errors():
    for bad in ({"min_cubes": 8, "max_cubes": 5}, {"mode": "spin"}, {"min_turns": 4}, {"colour": 1}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)
