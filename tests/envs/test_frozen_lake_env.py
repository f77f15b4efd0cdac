"""FrozenLake: gymnasium's rules (moves, edges, the slip rule, the fixed maps) checked against gymnasium's own
FrozenLakeEnv, lakes always solvable with the recorded optimum equal to an independent search, oracle and
random play, slippery ice, seed-exactness across processes, hostile replies, presets and config."""

from __future__ import annotations

import random
from collections import deque

import numpy as np
import pytest
from gymnasium.envs.toy_text.frozen_lake import MAPS
from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv as GymFrozenLake
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.envs.frozen_lake import FrozenLakeConfig
from vlm_envs.envs.frozen_lake.actions import ACTION_NAMES, format_actions
from vlm_envs.envs.frozen_lake.lake import gymnasium_lake, moved, slip_offset
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.frozen_lake"


def bfs_on_rows(rows: list[str]) -> int:
    """Moves from S to G over the letter rows, never onto an H (an independent search over the text)."""
    n = len(rows)
    start = next((r, c) for r in range(n) for c in range(n) if rows[r][c] == "S")
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        (r, c), d = queue.popleft()
        if rows[r][c] == "G":
            return d
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < n and 0 <= nc < n and (nr, nc) not in seen and rows[nr][nc] != "H":
                seen.add((nr, nc))
                queue.append(((nr, nc), d + 1))
    raise AssertionError(f"no path in {rows}")


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"size": 8, "min_path": 10, "frozen_probability": 0.7},
        {"size": 5, "placement": "corners", "frozen_probability": 0.3},  # most draws fail: the cleared path
        {"size": 3, "frozen_probability": 0.0, "min_path": 4},
    ],
)
def test_lakes_are_solvable_far_enough_and_the_recorded_optimum_matches_an_independent_search(config):
    env = build_env(TARGET, **config)
    cfg = env.config
    for seed in range(60):
        _, info = env.reset(seed=seed)
        rows = info["lake"]
        assert len(rows) == cfg.size and all(len(row) == cfg.size and set(row) <= set("SFHG") for row in rows)
        assert "".join(rows).count("S") == "".join(rows).count("G") == 1
        assert info["optimal_moves"] == bfs_on_rows(rows) >= cfg.min_path
        if cfg.placement == "corners":
            assert rows[0][0] == "S" and rows[-1][-1] == "G"


def test_the_default_lakes_vary_and_keep_about_the_frozen_share():
    env = build_env(TARGET, size=8)
    lakes = [tuple(env.reset(seed=s)[1]["lake"]) for s in range(100)]
    assert len(set(lakes)) == 100
    holes = sum("".join(lake).count("H") for lake in lakes) / (100 * 62)
    assert 0.12 < holes < 0.22  # about 1 - 0.8, fewer where a draw without a path was thrown away


@pytest.mark.parametrize("map_name", ["4x4", "8x8"])
def test_moves_match_gymnasiums_frozen_lake_on_its_own_maps(map_name):
    """Non-slippery play (edges, holes, the goal) step by step against gymnasium's FrozenLakeEnv."""
    env = build_env(TARGET, map_name=map_name, max_actions_per_turn=1)
    gym_env = GymFrozenLake(map_name=map_name, is_slippery=False)
    assert list(gymnasium_lake(map_name).rows) == MAPS[map_name]
    rng = random.Random(0)
    for episode in range(40):
        env.reset(seed=episode)
        state, _ = gym_env.reset(seed=episode)
        done = False
        while not done:
            action = rng.randrange(4)
            state, reward, terminated, _, _ = gym_env.step(action)
            _, done, info = env.step(format_actions([action]))
            row, col = info.info["cell"]
            assert row * env._ep.lake.size + col == state
            assert (info.reward, info.terminated) == (reward, terminated)
            assert done == terminated or info.truncated


@pytest.mark.parametrize("success_rate", [1 / 3, 0.75, 0.0, 1.0])
def test_the_slip_rule_is_gymnasiums_transition_table(success_rate):
    """Each press's three outcomes and their probabilities equal gymnasium's ``P`` on the 8x8 map."""
    gym_env = GymFrozenLake(map_name="8x8", is_slippery=True, success_rate=success_rate)
    lake = gymnasium_lake("8x8")
    draws = (np.arange(30_000) + 0.5) / 30_000
    share = {o: float(np.mean([slip_offset(u, success_rate) == o for u in draws])) for o in (-1, 0, 1)}
    for s, by_action in gym_env.P.items():
        cell = divmod(s, 8)
        if lake.rows[cell[0]][cell[1]] in "HG":
            continue
        for action, outcomes in by_action.items():
            theirs: dict[int, float] = {}
            for p, nxt, _, _ in outcomes:
                theirs[nxt] = theirs.get(nxt, 0.0) + p
            ours: dict[int, float] = {}
            for offset, p in share.items():
                r, c = moved(8, cell, (action + offset) % 4)
                ours[r * 8 + c] = ours.get(r * 8 + c, 0.0) + p
            assert {k for k, v in ours.items() if v > 0} == {k for k, v in theirs.items() if v > 0}
            for k, v in theirs.items():
                assert ours.get(k, 0.0) == pytest.approx(v, abs=1e-3)


def test_slippery_ice_slides_about_two_moves_in_three_and_the_observation_says_so():
    env = build_env(TARGET, slippery=True, size=8)
    slid = total = seed = 0
    while total < 1500:
        env.reset(seed=seed)
        seed, done, episode_slid = seed + 1, False, 0
        while not done:
            obs, done, info = env.step("<answer>Left, Right, Up</answer>")
            moved_names, pressed = info.info["moved"], info.info["pressed"]
            total += len(pressed)
            episode_slid += sum(a != b for a, b in zip(moved_names, pressed, strict=True))
            assert ("The ice slid" in obs.text) == (moved_names != pressed)
        assert info.metrics["slips"] == episode_slid
        slid += episode_slid
    assert 0.62 < slid / total < 0.71  # gymnasium's default success_rate is 1/3


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"slippery": True},
        {"difficulty": "hard"},
        {"map_name": "8x8", "slippery": True},
        {"max_actions_per_turn": 1},
    ],
)
def test_oracle_wins_200_seeds_in_the_optimal_number_of_moves(config):
    env = build_env(TARGET, **config)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0 and end["fell_in_hole"] is False
        assert end["moves"] == end["optimal_moves"]


def test_random_baseline_is_far_below_the_oracle_and_falls_into_holes():
    env = build_env(TARGET, difficulty="hard")
    ends = [play(env, seed, "random") for seed in range(100)]
    assert sum(e["reward"] for e in ends) / 100 <= 0.1
    assert sum(e["fell_in_hole"] for e in ends) >= 50
    assert success_rate(TARGET, {"difficulty": "hard"}, "random", range(100)) < success_rate(
        TARGET, {"difficulty": "easy"}, "random", range(100)
    )


def test_a_hole_ends_the_episode_with_no_reward_and_the_edge_keeps_the_player():
    env = build_env(TARGET, map_name="4x4", render_mode="text")
    env.reset(seed=0)
    obs, done, info = env.step("<answer>Up, Left</answer>")  # both off the edge from the top left
    assert not done and info.info["cell"] == [0, 0] and info.metrics["action_valid"] is False
    assert "2 of them hit the edge" in obs.text and "P _ _ _" in obs.text
    obs, done, info = env.step("<answer>Right, Down, Right</answer>")  # (1, 1) is a hole: Right is not played
    assert done and info.terminated and not info.truncated and info.reward == 0.0
    assert info.info["pressed"] == ["Right", "Down"] and info.metrics["fell_in_hole"] is True
    assert "fell into a hole" in obs.text and "X" in obs.text.splitlines()[-4]
    assert env.episode_reward() == 0.0


def test_a_malformed_answer_costs_the_turn_and_a_stream_of_them_ends():
    env = build_env(TARGET, max_turns=3)
    env.reset(seed=1)
    obs, done, info = env.step("<answer>Left, Jump</answer>")
    assert "'Jump' is not an action" in obs.text and info.metrics["format_valid"] is False
    assert info.metrics["moves"] == 0 and not done
    obs, done, info = env.step("<answer>Left, Left, Left, Left</answer>")
    assert "4 actions given, at most 3" in obs.text
    _, done, info = env.step("no answer")
    assert done and info.truncated and info.metrics["success"] is False


def test_the_views_show_the_lake_and_the_player():
    env = build_env(TARGET, map_name="4x4", render_mode="vision+text", cell_size=32)
    obs, _ = env.reset(seed=0)
    assert len(obs.images) == 1 and obs.images[0].size == (128, 128)
    assert "P _ _ _\n_ O _ O\n_ _ _ O\nO _ _ G" in obs.text
    first = np.asarray(obs.images[0])
    obs, _, _ = env.step("<answer>Down</answer>")
    second = np.asarray(obs.images[0])
    changed = np.argwhere((first != second).any(axis=2))
    assert (
        changed[:, 0].min() >= 0 and changed[:, 0].max() < 64 and changed[:, 1].max() < 32
    )  # only tiles (0,0), (1,0)
    assert build_env(TARGET, render_mode="text").reset(seed=0)[0].images == []


@pytest.mark.parametrize(
    "config", [{}, {"slippery": True, "render_mode": "vision+text"}, {"map_name": "8x8", "slippery": True}]
)
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, render_mode="vision+text", slippery=True), 3)


def test_presets_grow_the_lake_and_the_path_and_an_explicit_knob_wins():
    sizes = [FrozenLakeConfig(difficulty=level).size for level in ("easy", "medium", "hard")]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    optimal = {}
    for level in ("easy", "hard"):
        env = build_env(TARGET, difficulty=level)
        optimal[level] = np.mean([env.reset(seed=s)[1]["optimal_moves"] for s in range(50)])
    assert optimal["hard"] > 2 * optimal["easy"]
    assert FrozenLakeConfig(difficulty="hard", size=5, min_path=3).size == 5


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"size": 4, "min_path": 7}, "exceeds 2 \\* \\(size - 1\\)"),
        ({"size": 16, "cell_size": 257}, "less than or equal to 256"),
        ({"size": 1}, "greater than or equal to 2"),
        ({"map_name": "5x5"}, "'random', '4x4' or '8x8'"),
        ({"frozen_probability": 1.5}, "less than or equal to 1"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=says):
        build_env(TARGET, **config)


def test_action_names_are_gymnasiums_order():
    assert ACTION_NAMES == ("Left", "Down", "Right", "Up")  # gymnasium: 0 left, 1 down, 2 right, 3 up
