"""Jigsaw: optimal swaps against an independent BFS, oracle and random play, seed-exactness across
processes, user images, hostile replies, views and config."""

from __future__ import annotations

import itertools
from collections import deque

import numpy as np
import pytest
from PIL import Image
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_seed_exact,
    episode_digest,
    play,
    success_rate,
)

from vlm_envs.checker import check_env
from vlm_envs.envs.jigsaw.actions import parse_swaps
from vlm_envs.envs.jigsaw.board import optimal_swaps, oracle_swaps, swap
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.jigsaw"


def bfs_swap_distances(tiles: int) -> dict[tuple[int, ...], int]:
    """Fewest swaps from every permutation to the identity, by BFS over all transpositions."""
    start = tuple(range(tiles))
    dist, queue = {start: 0}, deque([start])
    while queue:
        board = queue.popleft()
        for a, b in itertools.combinations(range(tiles), 2):
            nxt = swap(board, a, b)
            if nxt not in dist:
                dist[nxt] = dist[board] + 1
                queue.append(nxt)
    return dist


@pytest.mark.parametrize("tiles", [4, 6])
def test_tiles_minus_cycles_equals_bfs_and_the_oracle_sequence_solves(tiles):
    for board, d in bfs_swap_distances(tiles).items():
        assert optimal_swaps(board) == d
        seq = oracle_swaps(board)
        for a, b in seq:
            board = swap(board, a, b)
        assert len(seq) == d and board == tuple(range(tiles))


def test_episodes_record_the_bfs_optimum_and_are_never_solved():
    env = build_env(TARGET, n=2)
    dist = bfs_swap_distances(4)
    for seed in range(100):
        _, info = env.reset(seed=seed)
        assert info["optimal_swaps"] == dist[tuple(info["board"])] >= 1


@pytest.mark.parametrize("n", [2, 3, 4])
def test_oracle_wins_200_seeds_in_the_optimal_number_of_swaps(n):
    env = build_env(TARGET, n=n, render_mode="text")
    for seed in range(200):
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["swaps_used"] == end["optimal_swaps"]


def test_random_baseline_is_far_below_the_oracle():
    assert success_rate(TARGET, {"render_mode": "text"}, "random", range(200)) <= 0.05  # measured 0.0


@pytest.mark.parametrize("config", [{}, {"n": 4, "numbers": False}, {"render_mode": "vision+text", "n": 2}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 5)


def test_user_images_are_picked_by_seed_from_the_sorted_listing(tmp_path):
    for i, color in enumerate([(250, 0, 0), (0, 250, 0), (0, 0, 250)]):
        ramp = np.linspace(0, 255, 90, dtype=np.uint8)[None, :, None].repeat(60, 0)
        pixels = np.concatenate([np.full((60, 90, 3), color, np.uint8)[..., :2], ramp], axis=2)
        Image.fromarray(pixels).save(tmp_path / f"img{i}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    env = build_env(TARGET, image_dir=str(tmp_path), n=2, numbers=False)
    picked = {env.reset(seed=s)[1]["image"] for s in range(30)}
    assert picked == {"img0.png", "img1.png", "img2.png"}
    _, info = env.reset(seed=4)
    again = build_env(TARGET, image_dir=str(tmp_path), n=2, numbers=False)
    assert again.reset(seed=4)[1]["image"] == info["image"]
    assert episode_digest(env, 4) == episode_digest(again, 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image files"):
        build_env(TARGET, image_dir=str(tmp_path / "empty"))


def test_an_unreadable_image_dir_or_image_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="cannot be read: File name too long"):
        build_env(TARGET, image_dir="9" * 5000)
    (tmp_path / "broken.png").write_bytes(b"not a png")
    env = build_env(TARGET, image_dir=str(tmp_path))
    with pytest.raises(ValueError, match=r"the image 'broken\.png' in image_dir cannot be read"):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="cannot be read"):
        build_env(TARGET).reset(seed=0, options={"image_dir": "/" + "x" * 300})


def test_views_numbers_and_text_grid():
    env = build_env(TARGET, render_mode="vision+text", n=3, image_size=300)
    obs, info = env.reset(seed=2)
    assert len(obs.images) == 1 and obs.images[0].size == (3 * 100 + 4 * 4,) * 2
    rows = [line.split() for line in obs.text.splitlines() if line.replace(" ", "").isdigit()]
    assert [int(v) - 1 for row in rows for v in row] == info["board"]
    plain = build_env(TARGET, n=3, image_size=300, numbers=False).reset(seed=2)[0].images[0]
    assert plain.tobytes() != obs.images[0].tobytes()


def test_parse_swaps():
    assert parse_swaps("<answer>swap(1,5) swap( 2 , 3 );swap(9,1)</answer>", 9, 4).swaps == (
        (0, 4),
        (1, 2),
        (8, 0),
    )
    assert "outside" in parse_swaps("<answer>swap(1,10)</answer>", 9, 4).error
    assert "itself" in parse_swaps("<answer>swap(2,2)</answer>", 9, 4).error
    assert "at most 1" in parse_swaps("<answer>swap(1,2) swap(2,3)</answer>", 9, 1).error
    assert "expected swap" in parse_swaps("<answer>swap(1,2) and more</answer>", 9, 4).error


def test_hostile_replies_and_check_env():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, n=2, max_turns=3))


def test_config_errors_and_per_sample_config():
    for bad in ({"n": 5}, {"n": 1}, {"shape": "round"}, {"image_dir": "/nonexistent/folder"}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)
    from vlm_envs.envs.jigsaw import build_env as module_build

    env = module_build({"metadata": {"env_config": {"n": 2}}}, type("A", (), {"max_turns": 1})())
    _, info = env.reset(seed=3)
    assert len(info["board"]) == 4
    _, done, step = env.step("no answer")
    assert done and step.truncated and not step.metrics["format_valid"]
