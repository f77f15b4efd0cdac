"""PolyominoPacking episodes: the answer parser, the oracle taking back a piece and winning every seed per
level in one turn a piece, dead ends without removals, a level past the search budget, random play, the
levels the presets draw, refused actions, one state by two paths, the picture's cells, seed-exactness,
hostile replies."""

from __future__ import annotations

import pytest
from puzzle_helpers import (
    assert_hostile_never_raise,
    assert_malformed_replies_end_at_the_cap,
    assert_seed_exact,
    play,
    success_rate,
)
from rationale_truth import TRUTH

from vlm_envs.checker import check_env
from vlm_envs.envs.polyomino_packing import generator
from vlm_envs.envs.polyomino_packing.actions import Action, format_action, parse_action
from vlm_envs.envs.polyomino_packing.render import COLORS
from vlm_envs.envs.polyomino_packing.rules import covered, fitting
from vlm_envs.envs.polyomino_packing.shapes import normalized, orientations
from vlm_envs.registry import build_env
from vlm_envs.state_signals import UNREACHABLE

TARGET = "vlm_envs.envs.polyomino_packing"
L_TROMINO = ((0, 0), (1, 0), (1, 1))  # #. / ##
T_TETROMINO = ((0, 0), (0, 1), (0, 2), (1, 1))  # ### / .#.
S_TETROMINO = ((0, 1), (0, 2), (1, 0), (1, 1))  # .## / ##.
F_PENTOMINO = ((0, 1), (0, 2), (1, 0), (1, 1), (2, 1))
L_TETROMINO = ((0, 0), (0, 1), (0, 2), (1, 0))  # ### / #..


def test_the_answer_parser_reads_placements_and_removals_and_refuses_the_rest():
    assert parse_action("<answer>piece B, rotate 90, at row 2 col 3</answer>").action == Action(
        1, False, 90, False, 1, 2
    )
    assert parse_action(
        "ok <answer> Piece c ,MIRROR, Rotate 270°, at Row 10, Column 1. </answer>"
    ).action == Action(2, False, 270, True, 9, 0)
    assert parse_action("<answer>A row 1 col 1</answer>").action == Action(0, False, 0, False, 0, 0)
    assert parse_action("<answer>remove piece D</answer>").action == Action(3, remove=True)
    errors = {
        "<answer>piece B, rotate 90, mirror, at row 2 col 3</answer>": "write mirror before rotate",
        "<answer>piece B, rotate 45, at row 2 col 3</answer>": "not a quarter turn",
        "<answer>piece B at row 2 col 3; piece C at row 1 col 1</answer>": "is not one action",
        "<answer>put B somewhere</answer>": "is not one action",
        "piece B, rotate 90, at row 2 col 3": "no <answer>",
    }
    for text, says in errors.items():
        assert says in parse_action(text).error, text
    assert "<" not in parse_action("<answer><image> B</answer>").error
    action = Action(4, False, 180, True, 0, 6)
    assert parse_action(format_action(action)).action == action


def test_the_oracle_takes_back_a_piece_out_of_place_and_explains_it():
    env = build_env(TARGET)
    env.reset(seed=0)
    start = env.distance_to_goal()
    _, _, step = env.step("<answer>piece A, rotate 0, at row 1 col 3</answer>")  # fits, in no packing
    assert step.metrics["action_valid"] and env.distance_to_goal() == start + 1
    reply, reason = env.oracle_response(), env.oracle_rationale()
    assert reply == "<answer>remove A</answer>" and "so I take it back" in reason
    TRUTH["polyomino_packing"](env, reason, reply)
    while not env.step(env.oracle_response())[1]:
        pass
    assert env.episode_reward() == 1.0 and env.placed and len(env.placed) == 5


def test_without_removals_a_dead_end_is_unreachable_and_the_oracle_has_no_reply():
    env = build_env(TARGET, removals=False)
    env.reset(seed=0)
    env.step("<answer>piece A, rotate 0, at row 1 col 3</answer>")
    assert env.distance_to_goal() == UNREACHABLE and env.oracle_response() is None
    _, _, step = env.step("<answer>remove A</answer>")
    assert step.metrics["format_valid"] and not step.metrics["action_valid"]


def test_a_level_past_the_search_budget_has_no_distance_but_the_oracle_still_wins(monkeypatch):
    monkeypatch.setattr(generator, "MAX_NODES", 1)
    env = build_env(TARGET, difficulty="hard")
    _, info = env.reset(seed=0)
    assert info["distance_exact"] is False and info["attempt"] == generator.LEVEL_ATTEMPTS - 1
    assert env.distance_to_goal() is None
    assert play(env, 0, "oracle")["success"] is True
    env.reset(seed=0)
    level = env.level
    away = next(
        a
        for p in range(len(level.pieces))
        for a in fitting(level, {}, p, env.config.mirror)
        if covered(level, a) != level.solution[p]
    )
    env.step(format_action(away))  # a placement that fits, not where the generator's packing puts it
    assert env.oracle_response() == f"<answer>remove {'ABCDEFGH'[away.piece]}</answer>"


# ----- episodes -----


@pytest.mark.parametrize(("difficulty", "seeds"), [("easy", 30), ("medium", 20), ("hard", 6)])
def test_the_oracle_wins_every_seed_one_piece_a_turn(difficulty, seeds):
    env = build_env(TARGET, difficulty=difficulty)
    for seed in range(seeds):
        _, info = env.reset(seed=seed)
        assert env.distance_to_goal() == info["optimal_placements"] == env.config.pieces
        end = play(env, seed, "oracle")
        assert end["success"] is True and end["steps"] == end["placements"] == env.config.pieces
        assert end["removals"] == 0 and env.distance_to_goal() == 0


def test_random_play_is_far_below_the_oracle_and_harder_on_hard():
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(40))
    hard = success_rate(TARGET, {"difficulty": "hard"}, "random", range(8))
    assert hard < easy <= 0.6 and hard == 0.0


def test_the_levels_are_partitions_of_their_region_as_the_presets_say():
    for difficulty in ("easy", "medium", "hard"):
        env = build_env(TARGET, difficulty=difficulty)
        mirrored_any = False
        for seed in range(6):
            env.reset(seed=seed)
            level, cfg = env.level, env.config
            cells = [c for part in level.solution for c in part]
            assert sorted(cells) == list(level.region) and len(level.solution) == cfg.pieces
            assert all(cfg.min_size <= len(part) <= cfg.max_size for part in level.solution)
            for shape, part in zip(level.pieces, level.solution, strict=True):
                assert normalized(part) in orientations(shape, cfg.mirror)
                mirrored_any |= normalized(part) not in orientations(shape, False)
            if cfg.shape == "rectangle":
                assert len(level.region) == level.rows * level.cols
            assert _connected(set(level.region))
        assert mirrored_any == (difficulty == "hard")  # hard shows pieces that fit only mirrored


def _connected(cells: set) -> bool:
    seen, stack = set(), [min(cells)]
    while stack:
        r, c = stack.pop()
        if (r, c) in cells and (r, c) not in seen:
            seen.add((r, c))
            stack += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]
    return seen == cells


def test_refused_and_malformed_actions_change_nothing():
    env = build_env(TARGET, render_mode="text")
    env.reset(seed=0)
    key = env.state_key()
    for reply, valid_format in (
        ("<answer>piece Q, rotate 0, at row 1 col 1</answer>", True),
        ("<answer>piece B, rotate 0, at row 1 col 1</answer>", True),  # (1,1) is outside the region
        ("<answer>piece B, mirror, rotate 0, at row 1 col 3</answer>", True),
        ("<answer>remove B</answer>", True),
        ("<answer>B</answer>", False),
    ):
        obs, done, step = env.step(reply)
        assert not done and not step.metrics["action_valid"] and step.metrics["format_valid"] is valid_format
        assert env.state_key() == key and ("Not played:" in obs.text) is valid_format
    obs, _, step = env.step("<answer>piece B, rotate 0, at row 1 col 3</answer>")
    assert step.metrics["action_valid"] and "it covers (1,3) (1,4) (2,3) (2,4)" in obs.text
    assert "1 # # B B . ." in obs.text and "B (placed):" in obs.text


def test_one_position_by_two_paths_is_one_state():
    a = "<answer>piece A, rotate 180, at row 1 col 5</answer>"
    b = "<answer>piece B, rotate 0, at row 1 col 3</answer>"
    first, second = build_env(TARGET), build_env(TARGET)
    first.reset(seed=0)
    second.reset(seed=0)
    for reply in (a, b):
        first.step(reply)
    for reply in (b, a, "<answer>remove A</answer>", a):
        second.step(reply)
    assert first.state_text() == second.state_text() and first.state_key() == second.state_key()
    assert first.distance_to_goal() == second.distance_to_goal() == 3


def test_the_picture_puts_each_placed_cell_under_its_row_and_column_numbers():
    env = build_env(TARGET, cell_size=40)
    env.reset(seed=0)
    image = env.step("<answer>piece E, rotate 270, at row 5 col 3</answer>")[0].images[0]
    label = 40 * 3 // 4  # the margin of the row and column numbers
    for r, c in env.placed[4]:
        x, y = label + c * 40 + 5, label + r * 40 + 5  # near the cell's top-left corner, off its letter
        assert image.getpixel((x, y)) == COLORS[4]
    assert image.getpixel((label + 5, label + 5)) == (200, 200, 200)  # (1,1) is outside the region


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "render_mode": "vision+text"}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 5)


def test_hostile_replies_check_env_and_config_errors():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="easy", removals=False))
    for bad in ({"pieces": 13}, {"min_size": 5, "max_size": 4}, {"shape": "circle"}, {"mirror": 1}):
        with pytest.raises(ValueError):
            build_env(TARGET, **bad)


def test_a_stream_of_malformed_replies_ends_at_the_turn_cap():
    assert_malformed_replies_end_at_the_cap(TARGET, 3)
    assert build_env(TARGET, difficulty="hard").config.turn_limit == 16
