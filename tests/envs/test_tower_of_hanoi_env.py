"""Tower of Hanoi: the shortest solution against a breadth-first search over every position, legal and
illegal moves, starts drawn from the seed, oracle and random play, answers, views, seed-exactness across
processes, hostile replies, presets and config."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    play,
    success_rate,
)

from vlm_envs.envs.tower_of_hanoi import TowerOfHanoiConfig, draw_start, move_error, moved, shortest_moves
from vlm_envs.envs.tower_of_hanoi.actions import parse_moves
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.tower_of_hanoi"


def neighbours(pegs: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Positions one legal move away (written from the rules, not from the env's code)."""
    tops = {peg: min((d for d, p in enumerate(pegs) if p == peg), default=None) for peg in range(3)}
    out = []
    for src, dst in itertools.permutations(range(3), 2):
        disk = tops[src]
        if disk is not None and (tops[dst] is None or tops[dst] > disk):
            out.append(tuple(dst if d == disk else p for d, p in enumerate(pegs)))
    return out


def distances_to(disks: int, goal: int) -> dict[tuple[int, ...], int]:
    """Moves from every position to all disks on ``goal`` (BFS from the solved position; moves reverse)."""
    solved = (goal,) * disks
    dist, queue = {solved: 0}, deque([solved])
    while queue:
        at = queue.popleft()
        for nxt in neighbours(at):
            if nxt not in dist:
                dist[nxt] = dist[at] + 1
                queue.append(nxt)
    return dist


@pytest.mark.parametrize("disks", [1, 2, 3, 4, 5])
def test_the_shortest_solution_is_legal_and_as_short_as_a_search_over_every_position(disks):
    for goal in range(3):
        dist = distances_to(disks, goal)
        assert len(dist) == 3**disks  # every position reaches the goal
        for pegs, best in dist.items():
            solution = shortest_moves(pegs, goal)
            assert len(solution) == best
            for move in solution:
                assert move_error(pegs, move) is None
                pegs = moved(pegs, move)
            assert pegs == (goal,) * disks


def test_the_classic_tower_takes_two_to_the_n_minus_one_moves():
    for disks in range(1, 11):
        assert len(shortest_moves((0,) * disks, 2)) == 2**disks - 1


def test_illegal_moves_are_named():
    pegs = (1, 0, 0)  # disk 1 on B; disks 2 and 3 on A (2 on top)
    assert move_error(pegs, (2, 0)) == "peg C is empty"
    assert move_error(pegs, (0, 1)) == "disk 2 cannot go onto the smaller disk 1 on peg B"
    assert move_error(pegs, (1, 1)) == "B->B moves a disk onto its own peg"
    assert move_error(pegs, (0, 2)) is None and moved(pegs, (0, 2)) == (1, 2, 0)


def test_starts_are_far_enough_vary_and_the_classic_one_is_the_tower_on_a():
    starts = set()
    for seed in range(100):
        pegs, goal = draw_start(4, 6, False, seed)
        assert len(shortest_moves(pegs, goal)) >= 6
        starts.add((pegs, goal))
    assert len(starts) > 60
    assert all(
        len(shortest_moves(*draw_start(4, 15, False, seed))) == 15 for seed in range(5)
    )  # the farthest
    assert draw_start(5, 1, True, 3) == ((0,) * 5, 2)


@pytest.mark.parametrize(
    "config", [{}, {"difficulty": "hard"}, {"start": "classic", "disks": 6}, {"max_moves_per_turn": 1}]
)
def test_oracle_wins_200_seeds_in_the_optimal_number_of_moves(config):
    env = build_env(TARGET, **config)
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["reward"] == 1.0
        assert end["moves"] == end["optimal_moves"] and end["invalid_moves"] == 0


def test_random_baseline_is_far_below_the_oracle_and_hard_is_harder():
    assert success_rate(TARGET, {}, "random", range(100)) <= 0.15
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(100))
    assert success_rate(TARGET, {"difficulty": "hard"}, "random", range(100)) < easy


def test_answers_take_arrows_dashes_and_to():
    assert parse_moves("<answer>A->C, b-a; c to B a→b</answer>", 4).moves == ((0, 2), (1, 0), (2, 1), (0, 1))
    for reply, says in [
        ("<answer>A->D</answer>", "is not a move"),
        ("<answer>A->C and B->C</answer>", "'and' is not a move"),
        ("<answer>A->B B->C C->A A->B B->A</answer>", "5 moves given, at most 4"),
        ("<answer> , </answer>", "holds no moves"),
        ("A->C", "no <answer>"),
    ]:
        assert says in parse_moves(reply, 4).error


def test_an_illegal_move_stops_the_turn_and_the_observation_says_why():
    env = build_env(TARGET, start="classic", disks=3, render_mode="text")
    env.reset(seed=0)
    obs, done, step = env.step("<answer>A->C, A->C, A->B</answer>")
    assert step.info["made"] == ["A->C"] and step.metrics["invalid_moves"] == 1
    assert "A->C is not allowed: disk 2 cannot go onto the smaller disk 1 on peg C" in obs.text
    assert step.metrics["action_valid"] is False and step.metrics["format_valid"] is True and not done
    assert "A: 3 2\nB: (empty)\nC (goal): 1" in obs.text


def test_a_malformed_answer_costs_the_turn_and_the_turn_cap_ends_the_episode():
    env = build_env(TARGET, max_turns=2)
    env.reset(seed=1)
    obs, done, step = env.step("<answer>A=>C</answer>")
    assert "Invalid answer" in obs.text and step.metrics["moves"] == 0 and not done
    _, done, step = env.step("nothing")
    assert done and step.truncated and step.metrics["success"] is False and env.episode_reward() == 0.0
    assert TowerOfHanoiConfig(disks=5, max_moves_per_turn=4).turn_limit == 16  # 2 x ceil(31 / 4)


def test_the_views_show_the_pegs():
    env = build_env(TARGET, start="classic", disks=3, render_mode="vision+text", image_width=240)
    obs, info = env.reset(seed=0)
    assert obs.images[0].size == (240, 160) and info["pegs"] == [[3, 2, 1], [], []] and info["goal"] == "C"
    assert "A: 3 2 1\nB: (empty)\nC (goal): (empty)" in obs.text
    before = np.asarray(obs.images[0])
    obs, _, _ = env.step("<answer>A->C</answer>")
    changed = np.argwhere((np.asarray(obs.images[0]) != before).any(axis=2))
    assert changed[:, 1].min() < 80 and changed[:, 1].max() >= 160  # the disk left A's third and reached C's
    assert build_env(TARGET, render_mode="text").reset(seed=0)[0].images == []


@pytest.mark.parametrize("config", [{}, {"render_mode": "vision+text", "disks": 6}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_get_an_observation():
    assert_hostile_never_raise(build_env(TARGET, render_mode="vision+text"), 3)


def test_presets_add_disks_and_distance_and_an_explicit_knob_wins():
    levels = [TowerOfHanoiConfig(difficulty=level) for level in ("easy", "medium", "hard")]
    assert [c.disks for c in levels] == sorted(c.disks for c in levels) and levels[0].disks < levels[-1].disks
    assert [c.min_moves for c in levels] == sorted(c.min_moves for c in levels)
    assert TowerOfHanoiConfig(difficulty="hard", disks=3, min_moves=2).disks == 3


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"disks": 3, "min_moves": 8}, "exceeds 2\\*\\*disks - 1 = 7"),
        ({"disks": 11}, "less than or equal to 10"),
        ({"image_width": 100}, "greater than or equal to 192"),
        ({"start": "tower"}, "'random' or 'classic'"),
    ],
)
def test_bad_configs_are_value_errors(config, says):
    with pytest.raises(ValueError, match=says):
        build_env(TARGET, **config)
