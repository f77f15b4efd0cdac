"""Lights Out: the press rule, scrambles that are always solvable, the smallest solution against brute
force, oracle and random play, seed-exactness across processes, hostile replies, views, presets, config."""

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

from vlm_envs.envs.lights_out import LightsOutConfig, fewest_presses, press, scramble
from vlm_envs.envs.lights_out.actions import parse_presses
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.lights_out"


def grid_press(grid: np.ndarray, r: int, c: int) -> None:
    """The press rule on a 2-D array (independent of the bitmasks): the light and its four neighbours flip."""
    n = len(grid)
    for dr, dc in ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1)):
        if 0 <= r + dr < n and 0 <= c + dc < n:
            grid[r + dr, c + dc] ^= 1


def as_mask(grid: np.ndarray) -> int:
    return sum(1 << i for i, on in enumerate(grid.ravel()) if on)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_a_press_flips_the_light_and_its_neighbours(n):
    rng = np.random.default_rng(n)
    grid = rng.integers(0, 2, (n, n))
    for cell in rng.integers(0, n * n, 20):
        before = as_mask(grid)
        grid_press(grid, *divmod(int(cell), n))
        assert press(n, before, int(cell)) == as_mask(grid)


def brute_force_fewest(n: int, lights: int) -> int:
    """The size of a smallest solution by trying every set of presses, smallest first."""
    for k in range(n * n + 1):
        for cells in itertools.combinations(range(n * n), k):
            board = lights
            for cell in cells:
                board = press(n, board, cell)
            if board == 0:
                return k
    raise AssertionError("unsolvable")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_smallest_solution_solves_and_matches_brute_force(n):
    for seed in range(40 if n < 4 else 12):
        lights = scramble(n, min(4, n * n), seed)
        solution = fewest_presses(n, lights)
        board = lights
        for cell in range(n * n):
            if solution >> cell & 1:
                board = press(n, board, cell)
        assert board == 0 and lights != 0
        assert solution.bit_count() == brute_force_fewest(n, lights)


def test_a_5x5_board_outside_the_scrambles_reach_is_refused():
    with pytest.raises(ValueError, match="no set of presses"):
        fewest_presses(5, 1)  # the 5x5 board has unsolvable positions: one light alone in a corner


def test_scrambles_vary_and_need_at_most_their_presses():
    env = build_env(TARGET)
    boards = set()
    for seed in range(100):
        _, info = env.reset(seed=seed)
        boards.add(tuple(info["lights"]))
        assert 1 <= info["optimal_presses"] <= env.config.scramble_presses
    assert len(boards) == 100


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard"}, {"n": 4, "scramble_presses": 16}, {"n": 8}])
def test_oracle_wins_200_seeds_in_the_fewest_presses(config):
    env = build_env(TARGET, **config)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0
        assert end["presses"] == end["optimal_presses"]


def test_random_baseline_is_far_below_the_oracle_and_hard_is_harder():
    assert success_rate(TARGET, {}, "random", range(100)) <= 0.05
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    assert success_rate(TARGET, {"difficulty": "hard"}, "random", range(100)) < easy


def test_answers_name_lights_by_column_and_row():
    assert parse_presses("<answer>a1, E5;c2 </answer>", 5, 3).cells == (0, 24, 7)
    assert parse_presses("<answer>B2 B2</answer>", 5, 3).cells == (6, 6)
    for reply, says in [
        ("<answer>F1</answer>", "'F1' is not a light (use A1 to E5)"),
        ("<answer>A0</answer>", "'A0' is not a light"),
        ("<answer>A1 B1 C1 D1</answer>", "4 presses given, at most 3"),
        ("<answer></answer>", "the answer is empty"),
        ("press A1", "no <answer>"),
    ]:
        assert says in parse_presses(reply, 5, 3).error


def test_a_step_presses_and_the_views_show_the_board():
    env = build_env(TARGET, n=3, scramble_presses=1, render_mode="vision+text", cell_size=32)
    obs, info = env.reset(seed=0)
    assert obs.images[0].size == (16 + 3 * 32, 16 + 3 * 32)

    def shown(text: str) -> set[str]:
        rows = [line.split() for line in text.splitlines() if line[:1].isdigit()]
        return {f"{'ABC'[c]}{row[0]}" for row in rows for c, mark in enumerate(row[1:]) if mark == "O"}

    assert shown(obs.text) == set(info["lights"])
    before = np.asarray(obs.images[0])
    obs, _, step = env.step("<answer>A1</answer>")
    assert set(step.info["lights"]) == set(info["lights"]) ^ {"A1", "B1", "A2"} == shown(obs.text)
    changed = np.argwhere((np.asarray(obs.images[0]) != before).any(axis=2))
    assert (changed.min(axis=0) >= 16).all() and (changed.max(axis=0) < 16 + 2 * 32).all()  # A1, B1, A2
    assert build_env(TARGET, render_mode="text").reset(seed=0)[0].images == []


def test_pressing_twice_undoes_and_a_malformed_answer_costs_the_turn():
    env = build_env(TARGET, max_turns=2)
    _, info = env.reset(seed=3)
    obs, done, step = env.step("<answer>C3, C3</answer>")
    assert step.info["lights"] == info["lights"] and step.metrics["presses"] == 2 and not done
    obs, done, step = env.step("<answer>Z9</answer>")
    assert "Invalid answer" in obs.text and step.metrics["format_valid"] is False
    assert done and step.truncated and step.metrics["success"] is False and env.episode_reward() == 0.0


@pytest.mark.parametrize("config", [{}, {"render_mode": "vision+text", "n": 4}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, render_mode="vision+text"), 3)


def test_presets_grow_the_board_and_the_scramble_and_an_explicit_knob_wins():
    levels = [LightsOutConfig(difficulty=level) for level in ("easy", "medium", "hard")]
    assert [c.n for c in levels] == sorted(c.n for c in levels) and levels[0].n < levels[-1].n
    assert [c.scramble_presses for c in levels] == sorted(c.scramble_presses for c in levels)
    assert LightsOutConfig(difficulty="hard", n=3, scramble_presses=2).n == 3


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"n": 3, "scramble_presses": 10}, "exceeds the 9 lights"),
        ({"n": 9}, "less than or equal to 8"),
        ({"cell_size": 8}, "greater than or equal to 16"),
        ({"scramble_presses": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=says):
        build_env(TARGET, **config)
