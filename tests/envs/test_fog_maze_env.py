"""FogMaze: generation, the recorded optimum against an independent BFS, oracle and random play,
seed-exactness across processes, hostile replies, views and config."""

from __future__ import annotations

from collections import deque

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.fog_maze.actions import parse_actions
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.fog_maze"
STEPS = {"U": (-1, 0), "R": (0, 1), "D": (1, 0), "L": (0, -1)}


def bfs_on_map(layout: str, view: str, heading: int) -> int:
    """Shortest action count on the ASCII layout from S into G (an independent search over the text map)."""
    grid = layout.splitlines()
    find = {ch: (r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch in "SG"}
    dirs = list(STEPS.values())
    start = (find["S"], heading if view == "first_person" else 0)
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        ((r, c), h), d = queue.popleft()
        if (r, c) == find["G"]:
            return d
        if view == "first_person":
            moves = [((r, c), (h + 1) % 4), ((r, c), (h + 3) % 4)]
            dr, dc = dirs[h]
            if grid[r + dr][c + dc] != "#":
                moves.append(((r + 2 * dr, c + 2 * dc), h))
        else:
            moves = [((r + 2 * dr, c + 2 * dc), 0) for dr, dc in dirs if grid[r + dr][c + dc] != "#"]
        for nxt in moves:
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, d + 1))
    raise AssertionError("goal unreachable")


@pytest.mark.parametrize("view", ["local", "first_person"])
def test_recorded_optimum_matches_an_independent_bfs_and_goal_is_far_enough(view):
    env = build_env(TARGET, view=view, size=(7, 8), loop_fraction=0.2, min_distance=6)
    for seed in range(60):
        _, info = env.reset(seed=seed)
        assert info["optimal_moves"] == bfs_on_map(info["layout"], view, info["heading"])
        assert bfs_on_map(info["layout"], "local", 0) >= 6


@pytest.mark.parametrize("view", ["local", "first_person"])
def test_oracle_wins_200_seeds_in_the_optimal_number_of_moves(view):
    env = build_env(TARGET, view=view)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0
        assert end["moves"] == end["optimal_moves"] and end["invalid_moves"] == 0


def test_random_baseline_is_far_below_the_oracle():
    rate = success_rate(TARGET, {}, "random", range(100))
    assert rate <= 0.2  # measured 0.01 on seeds 0-99 (README); the oracle wins every seed


@pytest.mark.parametrize("config", [{}, {"view": "first_person"}, {"render_mode": "text", "view_size": 5}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_views_show_only_the_neighbourhood():
    env = build_env(TARGET, render_mode="vision+text", view_size=3, cell_size=40)
    obs, _ = env.reset(seed=3)
    assert len(obs.images) == 1 and obs.images[0].size == (3 * 40 + 4 * 10, 3 * 40 + 4 * 10)
    grid = [line for line in obs.text.splitlines() if set(line) <= set("#.@G ") and line.strip()]
    assert "@" in "".join(grid) and len(grid) <= 7 and all(len(line) <= 7 for line in grid)
    fp = build_env(TARGET, view="first_person", image_size=(160, 120))
    obs, _ = fp.reset(seed=3)
    assert obs.images[0].size == (160, 120) and "You face" in obs.text
    _, _, step = fp.step("<answer>Turn Left, TurnRight, tl</answer>")
    assert step.metrics["format_valid"] and step.metrics["moves"] == 3 and step.metrics["cells_seen"] >= 1


def test_metrics_count_revisits_and_blocked_moves():
    env = build_env(TARGET, max_actions_per_turn=8)
    _, info = env.reset(seed=11)
    grid = info["layout"].splitlines()
    r, c = 2 * info["start"][0] + 1, 2 * info["start"][1] + 1
    open_dir = next(d for d, (dr, dc) in STEPS.items() if grid[r + dr][c + dc] != "#")
    back = {"U": "D", "D": "U", "L": "R", "R": "L"}[open_dir]
    wall_dir = next((d for d, (dr, dc) in STEPS.items() if grid[r + dr][c + dc] == "#"), None)
    reply = f"{open_dir} {back}" + (f" {wall_dir}" if wall_dir else "")
    _, _, step = env.step(f"<answer>{reply}</answer>")
    assert step.metrics["revisits"] == 1 and step.metrics["invalid_moves"] == (1 if wall_dir else 0)


def test_parse_actions_spellings_and_errors():
    assert parse_actions("<answer>Up, l; DOWN\nr</answer>", "local", 4).actions == (0, 3, 2, 1)
    assert parse_actions("<answer>forward turn right TL</answer>", "first_person", 4).actions == (0, 2, 1)
    assert parse_actions("<answer>Forward</answer>", "local", 4).error is not None
    assert "at most 2" in parse_actions("<answer>U U U</answer>", "local", 2).error
    assert "?" in parse_actions("<answer><image></answer>", "local", 2).error


def test_hostile_replies_and_check_env():
    env = build_env(TARGET)
    assert_hostile_never_raise(env, 0)
    check_env(build_env(TARGET, view="first_person"))


def test_config_errors_and_per_sample_config():
    with pytest.raises(ValueError):
        build_env(TARGET, view="first_person", render_mode="text")
    with pytest.raises(ValueError):
        build_env(TARGET, size=(3, 3), min_distance=9)
    with pytest.raises(ValueError):
        build_env(TARGET, colour="red")
    from vlm_envs.envs.fog_maze import build_env as module_build

    env = module_build({"metadata": {"env_config": {"size": [5, 6]}}}, type("A", (), {"max_turns": 2})())
    _, info = env.reset(seed=1)
    assert len(info["layout"].splitlines()) == 11 and env.config.max_turns == 2
    env.step("<answer>Up</answer>")
    assert env.step("nothing")[1] is True


@pytest.mark.parametrize(("config", "cap"), [({}, 100), ({"max_moves": 7}, 7), ({"max_turns": 3}, 3)])
def test_a_stream_of_malformed_replies_ends_at_the_turn_cap(config, cap):
    """Without max_turns the cap is max_moves turns: a valid turn plays an action, a malformed one none."""
    env = build_env(TARGET, **config)
    env.reset(seed=0)
    turns, done = 0, False
    while not done and turns <= cap:
        obs, done, info = env.step("no answer here")
        turns += 1
        assert "Invalid answer" in obs.text and info.metrics["format_valid"] is False
    assert (turns, info.truncated, info.metrics["success"]) == (cap, True, False)
