"""The slime hook with a windowed history: one Sample per turn, through slime's fan-out (stand-in)."""

from __future__ import annotations

import asyncio
import functools

import pytest
from rollout_helpers import assert_sample_invariants, script, slime_args
from row_helpers import oracle_replies
from slime.observability.rollout_data_utils import validate_rollout_id_annotated
from slime.rollout.sglang_rollout import GenerateState, generate_and_rm
from slime.utils.types import Sample

from vlm_envs.credit.gigpo import discounted_returns
from vlm_envs.rollout import contract
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.history import turn_rewards

MOVES = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Down</answer>", "<answer>Right</answer>"]
SOKOBAN = {"grid_size": [6, 6], "num_boxes": 1}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


make_args = functools.partial(
    slime_args,
    rollout_max_response_len=64,
    vlm_envs_check_template=False,
    custom_generate_function_path="vlm_envs.rollout.slime.generate",
    rollout_interaction_env_path="sokoban",
    max_turns=4,
)


def run(args, sample, max_new_tokens=64):
    async def one_loop():
        try:
            return await generate_and_rm(args, sample, {"temperature": 1.0, "max_new_tokens": max_new_tokens})
        finally:
            await hook.close()

    return asyncio.run(one_loop())


def steps(out: list) -> list[float]:
    return [
        s.metadata["vlm_envs"]["reward_breakdown"]["step_rewards"][s.metadata["vlm_envs"]["turn"]]
        for s in out
    ]


def test_a_windowed_episode_fans_out_into_one_valid_sample_per_turn(served):
    server, codec = served
    script(server, codec, *MOVES)
    sample = Sample(index=3, group_index=1, metadata={"seed": 2, "env_config": SOKOBAN})
    out = run(make_args(server, vlm_envs_history="window:2"), sample)
    assert isinstance(out, list) and len(out) == 4
    records = [s.metadata["vlm_envs"] for s in out]
    assert [r["turn"] for r in records] == [0, 1, 2, 3] and {r["num_turns"] for r in records} == {4}
    assert len({r["episode_id"] for r in records}) == 1 and records[0]["history"] == "window:2"
    assert [r["context_turns"] for r in records] == [[], [0], [0, 1], [1, 2]]
    validate_rollout_id_annotated([[out]])  # slime's check of a rollout's output: prompt x episode x turns
    for one in out:
        assert one is not sample and one.index == 3 and one.group_index == 1 and one.rollout_id == 3
        assert contract.sample_violations(one, codec.token_space) == []
        assert one.status is Sample.Status.COMPLETED and one.reward == 0.0  # the env's turn cap, unsolved
        assert one.loss_mask == [1] * one.response_length  # the reply only
        assert len(one.multimodal_inputs["images"]) == len(one.multimodal_train_inputs["image_grid_thw"])
    assert [len(s.multimodal_inputs["images"]) for s in out] == [1, 2, 3, 3]
    # the same prompt prefix (the task) opens every turn's sample
    prompt = len(out[0].tokens) - out[0].response_length
    assert all(s.tokens[:prompt] == out[0].tokens[:prompt] for s in out)


def test_turn_rewards_and_slimes_reward_model_for_the_rest(served):
    server, codec = served
    script(server, codec, *MOVES)
    args = make_args(server, vlm_envs_history="window:0", vlm_envs_turn_reward="step")
    out = run(args, Sample(index=0, metadata={"seed": 2, "env_config": {**SOKOBAN, "reward_mode": "shaped"}}))
    assert [s.reward for s in out] == steps(out)
    script(server, codec, *MOVES)
    args = make_args(
        server,
        vlm_envs_history="window:1",
        vlm_envs_set_reward=False,
        custom_rm_path="vlm_envs.rollout.slime.reward",
    )
    out = run(args, Sample(index=0, metadata={"seed": 2, "env_config": SOKOBAN}))
    assert all(s.reward == 0.0 and s.metadata["vlm_envs"]["turn_reward"] == "episode" for s in out)


def test_the_full_history_still_returns_one_sample(served):
    server, codec = served
    script(server, codec, *MOVES)
    sample = Sample(index=0, metadata={"seed": 2, "env_config": SOKOBAN})
    out = run(make_args(server, vlm_envs_history="full"), sample, max_new_tokens=4096)  # the whole response
    assert out is sample and out.reward == 0.0 and out.metadata["vlm_envs"]["num_turns"] == 4


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("vlm_envs_history", "last:3", "window:K"),
        ("vlm_envs_turn_reward", "mean", "turn reward must be one of"),
        ("vlm_envs_gamma", 1.5, "gamma must be a number in [0, 1], got 1.5"),
        ("vlm_envs_gamma", -0.1, "gamma must be a number in [0, 1], got -0.1"),
        ("vlm_envs_gamma", float("nan"), "gamma must be a number in [0, 1], got nan"),
        ("vlm_envs_gamma", float("inf"), "gamma must be a number in [0, 1], got inf"),
        ("vlm_envs_gamma", True, "gamma must be a number in [0, 1], got True"),
        ("vlm_envs_gamma", "0.9", "gamma must be a number in [0, 1], got '0.9'"),
        ("vlm_envs_shaping", "potential", "shaping must be one of none, distance, got 'potential'"),
        ("vlm_envs_shaping", "distance", "shapes the turn samples of a windowed history, not the full one"),
    ],
)
def test_bad_history_settings_fail_the_sample_with_the_key_named(served, key, value, message):
    server, _ = served
    sample = Sample(index=0, metadata={"seed": 2, "env_config": SOKOBAN})
    out = run(make_args(server, **{key: value}, custom_rm_path="vlm_envs.rollout.slime.reward"), sample)
    assert out.status is Sample.Status.FAILED and message in out.metadata["vlm_envs"]["error"]


@pytest.mark.parametrize(
    ("gamma", "rewards"), [(0, [0.0, 0.0, 1.0]), (0.5, [0.25, 0.5, 1.0]), (None, [1.0] * 3)]
)
def test_the_yaml_gamma_discounts_the_turns_zero_included(served, gamma, rewards):
    """FogMaze seed 3 is won by the oracle in 3 turns with step rewards 0, 0, 1 (gamma 0 once became 1)."""
    server, codec = served
    script(server, codec, *oracle_replies("fog_maze", 3))
    yaml = {"vlm_envs_gamma": gamma} if gamma is not None else {}
    args = make_args(
        server,
        rollout_max_response_len=4096,
        rollout_interaction_env_path="fog_maze",
        vlm_envs_history="window:1",
        vlm_envs_turn_reward="return",
        **yaml,
    )
    out = run(args, Sample(index=0, metadata={"seed": 3}), max_new_tokens=4096)
    assert [s.status for s in out] == [Sample.Status.COMPLETED] * 3
    assert [s.reward for s in out] == rewards
    for one in out:
        assert_sample_invariants(one, codec)


#: Sokoban seed 2 (6x6, one box; the player starts on the target), 5 turns at most, gamma 0.5,
#: phi = -distance and phi(UNREACHABLE) = -max_turns = -5.
#: Solved: "Up" steps off the target (3 turns from the goal -> 2), "Down" steps back (2 -> 3), the oracle's
#: three replies solve it (3 -> 2 -> 1 -> 0); the last turn ended it (phi' = 0): terms 0.5 * -2 + 3,
#: 0.5 * -3 + 2, 0.5 * -2 + 3, 0.5 * -1 + 2, 0 + 1.
#: Stuck: "Down" walks into a wall (3 -> 3), "Up" steps off (3 -> 2), "Up" pushes the box against the top wall
#: (2 -> UNREACHABLE), two more turns walk on until the env's turn cap ends it (done, but truncated: the last
#: state keeps its potential): 0.5 * -3 + 3, 0.5 * -2 + 3, 0.5 * -5 + 2, 0.5 * -5 + 5, 0.5 * -5 + 5.
EPISODES = {
    "solved": (
        ["<answer>Up</answer>", "<answer>Down</answer>", *oracle_replies("sokoban", 2, **SOKOBAN)],
        [3, 2, 3, 2, 1],
        [2.0, 0.5, 2.0, 1.5, 1.0],
    ),
    "stuck": (
        [
            "<answer>Down</answer>",
            "<answer>Up</answer>",
            "<answer>Up</answer>",
            *["<answer>Down</answer>"] * 2,
        ],
        [3, 3, 2, -1, -1],
        [1.5, 2.0, -0.5, 2.5, 2.5],
    ),
}


@pytest.mark.parametrize("mode", ["episode", "step", "return"])
@pytest.mark.parametrize("name", sorted(EPISODES))
def test_distance_shaping_adds_its_terms_to_each_turn_reward_mode(served, mode, name):
    server, codec = served
    replies, distances, terms = EPISODES[name]
    outs = {}
    for shaping in ("none", "distance"):
        script(server, codec, *replies)
        yaml = dict(vlm_envs_history="window:1", vlm_envs_turn_reward=mode, vlm_envs_gamma=0.5, max_turns=5)
        args = make_args(server, vlm_envs_shaping=shaping, **yaml)
        outs[shaping] = run(args, Sample(index=0, metadata={"seed": 2, "env_config": SOKOBAN}))
    base, shaped = ([s.reward for s in outs[k]] for k in ("none", "distance"))
    records = [s.metadata["vlm_envs"] for s in outs["distance"]]
    assert [r["status"] for r in records] == ["completed"] * 5  # the env said done, the stuck one at its cap
    assert [r["distance_to_goal"] for r in records] == distances
    assert base == turn_rewards(steps(outs["none"]), 1.0 if name == "solved" else 0.0, mode, 0.5)
    added = discounted_returns(terms, 0.5) if mode == "return" else terms  # within the return, or per turn
    assert shaped == pytest.approx([b + t for b, t in zip(base, added, strict=True)])
    for one in outs["distance"]:
        assert_sample_invariants(one, codec)
