"""The Sokoban env through the protocol: episodes, metrics, rewards, config, hostile answers."""

import random
from types import SimpleNamespace

import gymnasium
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vlm_envs  # noqa: F401 - registers the gymnasium ids
from vlm_envs import EpisodeFinishedError, build_env
from vlm_envs.checker import check_env
from vlm_envs.envs.sokoban import SokobanEnv
from vlm_envs.protocol import IMAGE_PLACEHOLDER

TWO_BOXES = "########\n#@$.   #\n#      #\n# $.   #\n########"


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"render_mode": "text"},
        {"grid_size": (10, 10), "num_boxes": 3, "render_mode": "vision+text", "reward_mode": "shaped"},
        {"level": TWO_BOXES, "cell_size": 32},
    ],
)
def test_check_env_passes(config):
    check_env(build_env("sokoban", **config))


def test_reset_info_and_first_observation():
    env = build_env("sokoban", grid_size=(7, 7), num_boxes=2)
    obs, info = env.reset(seed=5)
    assert {"level", "optimal_moves", "optimal_exact", "seed", "attempt", "source"} <= set(info)
    assert info["seed"] == 5 and info["source"] == "generated" and info["optimal_exact"] is True
    assert info["level"] == env.ascii() and info["level"].count("$") == 2
    assert obs.to_dict()["obs_str"].count(IMAGE_PLACEHOLDER) == 1 and len(obs.images) == 1
    assert obs.images[0].mode == "RGB" and obs.images[0].size == (7 * 28, 7 * 28)
    assert "<answer>" in obs.text and "Push every box onto a target" in obs.text
    assert env.system_prompt() is None  # the instructions travel in the first observation


def test_text_mode_shows_the_grid_and_no_image():
    env = build_env("sokoban", level=TWO_BOXES, render_mode="text")
    obs, _ = env.reset(seed=0)
    assert not obs.images and IMAGE_PLACEHOLDER not in obs.to_dict()["obs_str"]
    assert TWO_BOXES in obs.text and "'$' box" in obs.text and "Moves left: 100" in obs.text


def test_solver_policy_solves_in_the_optimal_number_of_moves():
    env = build_env("sokoban", grid_size=(8, 8), num_boxes=2, max_actions_per_step=2)
    _, info = env.reset(seed=3)
    done, turns = False, 0
    while not done:
        _, done, step = env.step(env.solver_response())
        turns += 1
    assert step.terminated and not step.truncated
    assert step.metrics["success"] is True and step.metrics["moves_used"] == info["optimal_moves"]
    assert step.metrics["optimal_moves"] == info["optimal_moves"] and step.reward == 1.0
    assert turns == -(-info["optimal_moves"] // 2)
    assert env.episode_reward() == 1.0
    with pytest.raises(EpisodeFinishedError):
        env.step("<answer>Up</answer>")


def test_solution_from_a_mid_episode_state():
    env = build_env("sokoban", level=TWO_BOXES)
    env.reset()
    env.step("<answer>Down, Right</answer>")
    moves = env.solution()
    assert moves is not None
    for i in range(0, len(moves), 3):
        _, done, step = env.step("<answer>" + " ".join(moves[i : i + 3]) + "</answer>")
    assert done and step.metrics["success"]


def test_rule_metrics_for_blocked_and_effective_moves():
    env = build_env("sokoban", level="#####\n#@$.#\n#####")
    env.reset()
    _, done, step = env.step("<answer>up</answer>")
    assert step.metrics == {
        "format_valid": True,
        "action_valid": False,
        "action_effective": False,
        "boxes_on_target": 0,
    }
    assert not done and step.info["blocked"] == 1
    _, done, step = env.step("<answer>R</answer>")
    assert done and step.metrics["action_valid"] and step.metrics["action_effective"]
    assert step.metrics["boxes_on_target"] == 1 and step.metrics["moves_used"] == 2


def test_invalid_format_costs_a_turn_and_says_why():
    env = build_env("sokoban", level=TWO_BOXES, max_actions_per_step=2)
    env.reset()
    cases = {
        "I push right": "no <answer>",
        "<answer></answer>": "no moves",
        "<answer>Right, jump</answer>": "'jump' is not a move",
        "<answer>R R R</answer>": "at most 2 per turn",
    }
    for response, reason in cases.items():
        obs, done, step = env.step(response)
        assert reason in obs.text and not step.metrics["format_valid"] and step.info["moves"] == ""
        assert not done
    assert env.ascii() == TWO_BOXES and "Moves left: 100" in obs.text


def test_answer_parsing_accepts_case_letters_and_separators():
    env = build_env("sokoban", level=TWO_BOXES, max_actions_per_step=4)
    env.reset()
    _, _, step = env.step("thinking...<ANSWER>down;\nright,R  l</Answer>")
    assert step.metrics["format_valid"] and step.info["moves"] == "DRRL"
    _, _, step = env.step("<answer>Up</answer> then <answer>left</answer>")
    assert step.info["moves"] == "L"  # the last answer block counts


def test_max_steps_truncates():
    env = build_env("sokoban", level=TWO_BOXES, max_steps=2)
    env.reset()
    obs, done, step = env.step("<answer>Down, Down, Down</answer>")
    assert done and step.truncated and not step.terminated
    assert step.metrics["moves_used"] == 2 and step.metrics["success"] is False
    assert step.info["moves"] == "DD" and "episode is over" in obs.text


def test_max_turns_from_trainer_args_truncates():
    env = build_env("sokoban", args=SimpleNamespace(max_turns=2), level=TWO_BOXES)
    env.reset()
    assert env.step("hmm")[1] is False
    _, done, step = env.step("hmm")
    assert done and step.truncated and step.metrics["success"] is False


def test_shaped_reward_cannot_be_farmed_by_pushing_on_and_off():
    env = build_env("sokoban", level=TWO_BOXES, reward_mode="shaped", max_steps=50)
    env.reset()
    _, _, on = env.step("<answer>Right</answer>")
    _, _, off = env.step("<answer>Right</answer>")
    assert on.reward == pytest.approx(0.5) and off.reward == pytest.approx(-0.5)
    assert env.episode_reward() == pytest.approx(0.0)
    _, _, bad = env.step("no answer")
    assert bad.reward == pytest.approx(-0.1) and env.episode_reward() == pytest.approx(-0.1)


def test_shaped_episode_reward_sums_step_rewards_and_binary_is_success():
    for mode in ("shaped", "binary"):
        env = build_env("sokoban", grid_size=(7, 7), num_boxes=2, reward_mode=mode)
        env.reset(seed=1)
        rewards, done = [], False
        rng = random.Random(0)
        for _ in range(4):
            _, done, step = env.step(env.random_response(rng))
            rewards.append(step.reward)
        while not done:
            _, done, step = env.step(env.solver_response())
            rewards.append(step.reward)
        assert env.episode_reward() == pytest.approx(sum(rewards))
        assert env.episode_reward() == pytest.approx(2.0 if mode == "shaped" else 1.0)


def test_same_seed_same_episode_and_unseeded_resets_are_reproducible():
    a, b = (
        build_env("sokoban", grid_size=(8, 8), num_boxes=2),
        build_env("sokoban", grid_size=(8, 8), num_boxes=2),
    )
    obs_a, info_a = a.reset(seed=42)
    obs_b, info_b = b.reset(seed=42)
    assert info_a == info_b and obs_a.images[0].tobytes() == obs_b.images[0].tobytes()
    _, info = a.reset()
    assert b.reset(seed=info["seed"])[1] == info


def test_unknown_and_conflicting_config_is_rejected():
    with pytest.raises(ValueError, match="bogus"):
        build_env("sokoban", bogus=1)
    with pytest.raises(ValueError, match="not both"):
        build_env(
            "sokoban", level=TWO_BOXES, initial_base_grid=[[0]], initial_boxes=[], initial_player=[0, 0]
        )
    with pytest.raises(ValueError, match="exactly one player"):
        build_env("sokoban", level="#$.#")
    with pytest.raises(ValueError, match="render_mode"):
        build_env("sokoban", render_mode="3d")


def test_a_board_too_big_to_generate_or_render_is_rejected_at_once():
    """A dataset row's env_config is input too: a 100000x100000 grid asked for 10 GB and hung."""
    with pytest.raises(ValueError, match="at most 64 cells a side, got 100000x100000"):
        build_env("sokoban", grid_size=(100_000, 100_000))
    with pytest.raises(ValueError, match="a 64x64 board at cell_size=256 renders 16384 pixels a side"):
        build_env("sokoban", grid_size=(64, 64), cell_size=256)
    wide = "#" * 200 + "\n#@$." + " " * 195 + "#\n" + "#" * 200  # a given level is bounded by its image
    with pytest.raises(ValueError, match="a 3x200 board at cell_size=28 renders 5600 pixels"):
        build_env("sokoban", level=wide)
    build_env("sokoban", level=wide, render_mode="text").reset()  # no image: its own size is the bound
    obs, _ = build_env("sokoban", grid_size=(64, 64)).reset(seed=0)  # the largest grid still plays
    assert obs.images[0].size == (64 * 28, 64 * 28)


def test_slime_row_loads_from_sample_metadata_with_numpy_values():
    grid = np.array([np.array(row) for row in [[0] * 6, [0, 1, 1, 1, 2, 0], [0, 1, 1, 1, 1, 0], [0] * 6]])
    env_config = {
        "grid_size": np.array([4, 6]),
        "num_boxes": 1,
        "render_mode": "vision",
        "max_steps": 100,
        "wall_fraction": 0.0,
        "initial_base_grid": grid,
        "initial_boxes": np.array([np.array([1, 3])]),
        "initial_player": np.array([1, 1]),
    }
    sample = SimpleNamespace(metadata={"env_config": env_config})
    env = build_env("vlm_envs.envs.sokoban", sample=sample, args=SimpleNamespace(max_turns=5))
    _, info = env.reset(seed=0)
    assert info["level"] == "######\n#@ $.#\n#    #\n######"
    assert info["source"] == "given" and info["optimal_moves"] == 2 and info["optimal_exact"]
    assert env.config.max_turns == 5


def test_known_optimum_in_config_is_trusted():
    env = build_env("sokoban", level=TWO_BOXES, optimal_moves=9, optimal_exact=True)
    assert env.reset()[1]["optimal_moves"] == 9


def test_gymnasium_make():
    env = gymnasium.make("vlm_envs/Sokoban-v0", grid_size=(6, 6), render_mode="rgb_array")
    obs, info = env.reset(seed=0)
    assert obs["images"][0].shape == (6 * 28, 6 * 28, 3) and "level" in info
    _, reward, terminated, truncated, info = env.step("<answer>Up</answer>")
    assert info["metrics"]["format_valid"] is True and env.render().shape == (168, 168, 3)
    assert reward == 0.0 and not terminated and not truncated
    env.close()


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_hostile_answers_never_raise(text):
    env = SokobanEnv(level=TWO_BOXES, max_actions_per_step=5)
    env.reset()
    for response in (text, f"<answer>{text}</answer>", f"<answer>{text}"):
        obs, done, step = env.step(response)
        assert isinstance(step.metrics["format_valid"], bool)
        assert obs.to_dict()["obs_str"].count(IMAGE_PLACEHOLDER) == len(obs.images) == 1
        if done:
            break


@pytest.mark.parametrize(("config", "cap"), [({}, 100), ({"max_steps": 5}, 5), ({"max_turns": 4}, 4)])
def test_a_stream_of_malformed_replies_ends_at_the_turn_cap(config, cap):
    """Without max_turns the cap is max_steps turns: a valid turn plays a move, a malformed one none."""
    env = build_env("sokoban", level=TWO_BOXES, **config)
    env.reset(seed=0)
    turns, done = 0, False
    while not done and turns <= cap:
        obs, done, info = env.step("<answer>jump</answer>")
        turns += 1
        assert "Invalid answer" in obs.text and info.metrics["format_valid"] is False
    assert (turns, info.truncated, info.metrics["success"]) == (cap, True, False)
