"""FrameOrder: the physics on hand-built scenes (wall bounces, collisions, what is conserved), the order
measure, frames drawn where the objects are, every preset's animations unambiguous and won by the oracle,
answers in every spelling, the Mastermind feedback and retries, oracle and random play, seed-exactness
across processes, hostile replies, presets and config."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from puzzle_helpers import assert_hostile_never_raise, assert_seed_exact, play, success_rate

from vlm_envs.checker import check_env
from vlm_envs.envs.frame_order import Body, FrameOrderConfig, motion_matrix, order_gap, parse_order, simulate
from vlm_envs.envs.frame_order.generator import COLOURS
from vlm_envs.envs.frame_order.render import band_height, frame_image
from vlm_envs.registry import build_env

TARGET = "vlm_envs.envs.frame_order"
LEVELS = ("easy", "medium", "hard")


def l1_motion(frames, order) -> int:
    """How far ``order`` moves the objects, summed plainly (independent of the env's matrix)."""
    return sum(
        abs(p[0] - q[0]) + abs(p[1] - q[1])
        for a, b in itertools.pairwise(order)
        for p, q in zip(frames[a], frames[b], strict=True)
    )


# ----- physics -----


def test_a_ball_bounces_off_a_wall_exactly():
    ball = Body("ball", "red", 10, (140, 80), (4, 0))
    frames = simulate([ball], 4, 3).frames  # ticks: 144, 148, then 152 reflects to 148 off the wall at 150
    assert [f[0] for f in frames] == [(140, 80), (148, 80), (136, 80), (124, 80)]
    assert simulate([ball], 4, 3).bounces == 1


def test_two_boxes_meeting_face_on_swap_their_velocities():
    left = Body("box", "red", 10, (50, 80), (3, 0))
    right = Body("box", "blue", 10, (80, 80), (-1, 0))
    motion = simulate([left, right], 5, 2)
    assert motion.collisions == 1
    xs = [(f[0][0], f[1][0]) for f in motion.frames]
    # closing at 4 a tick from 30 apart: 18 apart (under 20) at tick 3; then red moves -1 a tick, blue +3
    assert xs == [(50, 80), (56, 78), (58, 80), (56, 86), (54, 92)]


def test_collisions_and_bounces_keep_objects_inside_and_never_speed_them_up():
    bodies = [
        Body("ball", "red", 9, (30, 30), (3, -2)),
        Body("box", "blue", 12, (60, 40), (-4, 1)),
        Body("ball", "green", 8, (100, 100), (2, 5)),
        Body("box", "black", 11, (130, 60), (-5, -3)),
    ]
    motion = simulate(bodies, 200, 1)  # a frame every tick
    assert motion.collisions > 0 and motion.bounces > 0
    for frame in motion.frames:
        for body, (x, y) in zip(bodies, frame, strict=True):
            assert body.radius <= x <= 160 - body.radius and body.radius <= y <= 160 - body.radius
    # collisions swap velocity components and bounces negate them, so the total speed (25 a tick) stays:
    # a tick moves the objects that much in all, less only where a bounce folds a step
    speed = sum(abs(c) for b in bodies for c in b.velocity)
    steps = [l1_motion(motion.frames, (t, t + 1)) for t in range(199)]
    assert max(steps) == speed and sum(s == speed for s in steps) > 150


# ----- the order measure -----


def test_straight_motion_makes_the_true_order_least_by_one_frames_move():
    frames = [((10 + 7 * t, 50), (90, 20 + 3 * t)) for t in range(6)]
    matrix = motion_matrix(frames)
    assert matrix[0, 5] == l1_motion(frames, [0, 5]) == 50
    assert order_gap(matrix) == 10  # e.g. swapping the last two frames adds one frame's move


def test_identical_frames_or_a_bounce_back_make_no_gap():
    same = [((20, 20),), ((40, 20),), ((40, 20),), ((60, 20),)]
    assert order_gap(motion_matrix(same)) == 0
    back = [((20, 20),), ((40, 20),), ((50, 20),), ((40, 20),)]  # frame 1 and frame 3 look alike
    assert order_gap(motion_matrix(back)) <= 0


# ----- drawing -----


def test_each_object_is_drawn_where_it_is_and_the_letter_above():
    bodies = [Body("ball", "red", 10, (40, 40), (0, 0)), Body("box", "blue", 12, (120, 100), (0, 0))]
    image = np.asarray(frame_image(bodies, [(40, 40), (120, 100)], "C", 160))
    band = band_height(160)
    assert image.shape == (160 + band, 160, 3)
    assert tuple(image[band + 40, 40]) == COLOURS["red"] and tuple(image[band + 100, 120]) == COLOURS["blue"]
    assert tuple(image[band + 100 - 11, 120 - 11]) == COLOURS["blue"]  # a box fills its corners
    assert tuple(image[band + 40 - 9, 40 - 9]) != COLOURS["red"]  # a ball does not
    other = np.asarray(frame_image(bodies, [(40, 40), (120, 100)], "D", 160))
    assert (image[:band] != other[:band]).any() and (image[band:] == other[band:]).all()


# ----- episodes -----


@pytest.mark.parametrize("level", LEVELS)
def test_every_animation_is_unambiguous_and_the_oracle_wins_it(level):
    env = build_env(TARGET, difficulty=level)
    cfg = env.config
    for seed in range(60):
        obs, info = env.reset(seed=seed)
        animation = env.animation
        frames = animation.motion.frames
        letters = info["order"].split(", ")
        assert sorted(letters) == [chr(65 + i) for i in range(cfg.frames)] and info["first"] == letters[0]
        assert len(obs.images) == cfg.frames and f"Frame {letters[0]} is the first." in obs.text
        assert animation.motion.collisions >= cfg.min_collisions
        assert len(set(frames)) == cfg.frames  # no two frames alike
        true = l1_motion(frames, range(cfg.frames))
        others = [l1_motion(frames, (0, *rest)) for rest in itertools.permutations(range(1, cfg.frames))][1:]
        assert true == info["true_motion"] and min(others) - true == info["gap"] >= cfg.min_gap
        assert play(env, seed, "oracle")["success"] is True


def test_the_frames_are_listed_by_letter_and_each_shows_its_moment():
    env = build_env(TARGET)
    obs, _ = env.reset(seed=4)
    animation = env.animation
    for image, letter, slot in zip(obs.images, "ABCDEF", obs.image_slots, strict=True):
        assert obs.text[:slot].endswith(f"Frame {letter}:\n")
        time = animation.labels.index(letter)
        drawn = frame_image(animation.bodies, animation.motion.frames[time], letter, env.config.frame_size)
        assert image.tobytes() == drawn.tobytes()


@pytest.mark.parametrize(
    "written",
    ["C, A, D, B", " C,A,D,B ", "CADB", "C A D B", "C -> A → D > B", "c; a; d; b", "(C) (A) (D) (B)"],
)
def test_an_order_is_read_in_every_spelling(written):
    assert parse_order(f"<think>A?</think><answer>{written}</answer>", "ABCD") == (("C", "A", "D", "B"), None)


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ("C, A, D, E", "there is no frame E"),
        ("C, A, D, C", "frame C is named more than once"),
        ("C, A, D", "frame B is missing"),
        ("C, A, D, B, 7", "'7' is not a frame letter"),
        ("ＣＡＤＢ", "is not a frame letter"),
        ("C, A, D, BB", "is not a frame letter"),
        ("Frame order: C, A, D, B", "'Frame' is not a frame letter"),
        ("C, A, \u0131, B", "is not a frame letter"),  # a dotless i, which upper-cases to I
        ("C A D \ufb00", "is not a frame letter"),  # the ff ligature, which upper-cases to FF
    ],
)
def test_a_wrong_set_of_letters_is_an_invalid_answer_that_says_why(answer, error):
    parsed = parse_order(f"<answer>{answer}</answer>", "ABCD")
    assert parsed.order is None and error in parsed.error


def test_a_wrong_order_says_how_many_frames_are_in_place_and_may_be_retried():
    env = build_env(TARGET, difficulty="easy", max_turns=4)
    env.reset(seed=3)
    truth = env.animation.labels
    key = env.state_key()
    swapped = (truth[0], truth[2], truth[1], truth[3])  # two frames out of place
    obs, done, step = env.step(f"<answer>{', '.join(swapped)}</answer>")
    assert not done and step.reward == 0.0 and step.metrics["frames_in_place"] == 2
    assert "2 of the 4 frames are in their right place" in obs.text and "3 answers left" in obs.text
    assert env.state_key() == key and env.distance_to_goal() == 1  # a guess is history, not state
    rotated = (truth[1], truth[2], truth[3], truth[0])
    obs, done, step = env.step(f"<answer>{''.join(rotated)}</answer>")
    assert step.metrics["frames_in_place"] == 0 and "0 of the 4 frames are" in obs.text
    obs, done, step = env.step("<answer>A, A, B, C</answer>")
    assert not done and step.metrics["format_valid"] is False and "frames_in_place" not in step.metrics
    obs, done, step = env.step(env.oracle_response())
    assert done and step.terminated and step.reward == 1.0 and env.distance_to_goal() == 0
    assert env.state_key() != key and obs.text == "Right: that is the order in time."


def test_answers_run_out_at_the_turn_cap():
    env = build_env(TARGET, max_turns=2)
    env.reset(seed=0)
    assert env.step("no answer")[1] is False
    obs, done, info = env.step("<answer>A, B, C, D, E, F</answer>")
    assert done and info.truncated and info.metrics["success"] is False and "no answers are left" in obs.text
    assert info.info["answer"] == ", ".join(env.animation.labels)


def test_the_state_text_holds_every_frames_positions_in_time_order_and_its_letter():
    env = build_env(TARGET)
    env.reset(seed=5)
    text = env.state_text()
    animation = env.animation
    for letter, frame in zip(animation.labels, animation.motion.frames, strict=True):
        assert f"{letter}: " + " ".join(f"({x}, {y})" for x, y in frame) in text
    for body in animation.bodies:
        assert f"{body.colour} {body.shape} (half-size {body.radius})" in text


def test_harder_levels_show_more_frames_and_objects_and_random_play_falls():
    configs = [FrameOrderConfig(difficulty=level) for level in LEVELS]
    sizes = [(c.frames, c.objects) for c in configs]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    hard = build_env(TARGET, difficulty="hard")
    assert all(hard.reset(seed=s)[1]["collisions"] >= 1 for s in range(10))
    easy = success_rate(TARGET, {"difficulty": "easy"}, "random", range(150))
    assert 0.0 < easy < 0.35 and success_rate(TARGET, {"difficulty": "hard"}, "random", range(50)) == 0.0


@pytest.mark.parametrize("config", [{}, {"difficulty": "hard", "frame_size": 96}])
def test_same_seed_same_episode_in_another_process(config):
    assert_seed_exact(TARGET, config, 7)


def test_hostile_replies_and_check_env():
    assert_hostile_never_raise(build_env(TARGET), 0)
    check_env(build_env(TARGET, difficulty="hard"))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"min_speed": 5, "max_speed": 3}, "min_speed 5 exceeds max_speed 3"),
        ({"max_speed": 8, "ticks_per_frame": 6}, "more than 40 units"),
        ({"objects": 3, "min_collisions": 2}, "needs 4 objects"),
        ({"objects": 2, "min_collisions": 1, "frames": 3, "max_speed": 2, "ticks_per_frame": 2}, "close"),
        ({"objects": 1, "min_speed": 2, "ticks_per_frame": 5, "min_gap": 6}, "min_gap 6 is over 5"),
        ({"frames": 9}, "less than or equal to 8"),
        ({"difficulty": "expert"}, "difficulty must be one of"),
    ],
)
def test_configs_that_cannot_make_an_animation_are_refused(config, message):
    with pytest.raises(ValueError, match=message):
        FrameOrderConfig(**config)
