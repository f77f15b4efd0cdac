"""SlidingPuzzle: solvable scrambles, the recorded optimum against an independent BFS, oracle and random
play per difficulty, the solver's fallbacks, seed-exactness across processes, parsing, hostile replies."""

from __future__ import annotations

from collections import deque

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.sliding_puzzle import solver
from vlm_envs.envs.sliding_puzzle.actions import parse_moves
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.sliding_puzzle"


def bfs_distance(board: tuple[int, ...], n: int) -> int:
    """Fewest slides to the solved board, by breadth-first search over gap moves (independent of the env)."""
    goal = (*range(1, n * n), 0)
    seen, queue = {board}, deque([(board, 0)])
    while queue:
        state, d = queue.popleft()
        if state == goal:
            return d
        gap = state.index(0)
        r, c = divmod(gap, n)
        for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= rr < n and 0 <= cc < n:
                nxt = list(state)
                nxt[gap], nxt[rr * n + cc] = nxt[rr * n + cc], 0
                if (t := tuple(nxt)) not in seen:
                    seen.add(t)
                    queue.append((t, d + 1))
    raise AssertionError("unsolvable board")


def test_the_recorded_optimum_is_the_bfs_distance():
    env = build_env(TARGET, difficulty="easy")
    for seed in range(25):
        _, info = env.reset(seed=seed)
        assert info["optimal_exact"] is True and 1 <= info["optimal_moves"] <= 8
        assert info["optimal_moves"] == bfs_distance(tuple(info["board"]), 3)


@pytest.mark.parametrize(("difficulty", "seeds"), [("easy", 200), ("medium", 200), ("hard", 30)])
def test_the_oracle_wins_every_seed_in_the_recorded_number_of_moves(difficulty, seeds):
    env = build_env(TARGET, difficulty=difficulty)
    for seed in range(seeds):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0
        assert end["moves"] == end["optimal_moves"]


def test_presets_set_the_board_and_an_explicit_knob_wins():
    assert build_env(TARGET, difficulty="hard").config.n == 4
    assert build_env(TARGET, difficulty="hard", n=3).config.n == 3
    _, info = build_env(TARGET).reset(seed=0, options={"difficulty": "hard"})
    assert len(info["board"]) == 16


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(60))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(60))
    assert hard < easy <= 0.5 and hard <= 0.05


def test_past_the_exact_budget_the_weighted_search_still_solves(monkeypatch):
    monkeypatch.setattr(solver, "EXACT_NODES", 5)
    solver.solve.cache_clear()
    try:
        env = build_env(TARGET, n=4, scramble_moves=30, max_turns=40)
        _, info = env.reset(seed=5)
        assert info["optimal_exact"] is False
        assert play(env, 5, "oracle")["success"] is True
        env.reset(seed=5)
        assert "My solution takes" in (env.oracle_rationale() or "")
    finally:
        solver.solve.cache_clear()


def test_without_any_search_the_oracle_walks_back_along_the_scramble(monkeypatch):
    monkeypatch.setattr(
        "vlm_envs.envs.sliding_puzzle.env.solve", lambda board, n: solver.Solution(None, False)
    )
    env = build_env(TARGET, max_turns=30)
    env.reset(seed=2)
    env.step("<answer>Up, Left, Down, Right</answer>")  # moves of its own first: the way back undoes them
    while (reply := env.oracle_response()) is not None:
        done = env.step(reply)[1]
    assert done and env.episode_reward() == 1.0


def test_a_move_without_a_tile_is_skipped_and_counted():
    env = build_env(TARGET, max_actions_per_turn=4)
    seed = next(s for s in range(50) if env.reset(seed=s)[1]["board"].index(0) != 4)  # the gap on an edge
    env.reset(seed=seed)
    gap = env.board.index(0)
    blocked = "Up" if gap // 3 == 2 else "Down" if gap // 3 == 0 else "Left" if gap % 3 == 2 else "Right"
    before = env.board
    obs, _, step = env.step(f"<answer>{blocked}</answer>")
    assert env.board == before and step.metrics["action_valid"] is False and step.metrics["format_valid"]
    assert "no tile to slide" in obs.text and step.metrics["moves"] == 0


def test_parse_moves_spellings_and_errors():
    assert parse_moves("<answer>Up, l; DOWN\nr</answer>", 4).moves == (0, 2, 1, 3)
    assert "at most 2" in parse_moves("<answer>U U U</answer>", 2).error
    assert "not a move" in parse_moves("<answer>swap(1,2)</answer>", 2).error
    assert "?" in parse_moves("<answer><image></answer>", 2).error


@pytest.mark.parametrize("config", [{}, {"render_mode": "text", "n": 4}, {"difficulty": "hard"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_views_show_the_board():
    env = build_env(TARGET, render_mode="vision+text", cell_size=40)
    obs, info = env.reset(seed=3)
    assert obs.images[0].size == (3 * 40 + 4 * 4, 3 * 40 + 4 * 4)
    grid = [line.split() for line in obs.text.splitlines() if line and set(line) <= set("012345678_ ")]
    assert [int(t) if t != "_" else 0 for row in grid for t in row] == info["board"]
    gap = info["board"].index(0)
    r, c = divmod(gap, 3)
    centre = (4 + c * 44 + 20, 4 + r * 44 + 20)
    assert max(obs.images[0].getpixel(centre)) < 60  # the gap is dark


def test_hostile_replies_check_env_and_config_errors():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="hard"))
    for bad in ({"n": 5}, {"scramble_moves": 0}, {"difficulty": "extreme"}, {"colour": "red"}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
