"""The slime hook against a stand-in of slime's Sample/GenerateState and the tiny model over HTTP."""

import asyncio
import math
from types import SimpleNamespace

import pytest
import torch
from rollout_helpers import script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import LegacySample, Sample

from vlm_envs.envs.geo3k import Geo3kEnv
from vlm_envs.envs.geo3k.problems import generate_problem
from vlm_envs.rollout import slime as hook
from vlm_envs.testing import Fault


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def run(args, sample, params=None):
    params = params if params is not None else {"temperature": 1.0, "max_new_tokens": 1024}

    async def one_loop():
        try:
            return await hook.generate(args, sample, params)
        finally:
            await hook.close()

    return asyncio.run(one_loop())


def test_sokoban_from_the_yaml_env_path_fills_every_sample_field(served):
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="vlm_envs.envs.sokoban", max_turns=3)
    sample = Sample(index=0, group_index=5, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
    script(server, codec, "<answer>Up</answer>", "<answer>Left</answer>")
    params = {"temperature": 1.0, "max_new_tokens": 1024}
    out = run(args, sample, params)
    assert out is sample and params == {"temperature": 1.0, "max_new_tokens": 1024}  # not mutated
    record = sample.metadata["vlm_envs"]
    assert record["env"] == "vlm_envs.envs.sokoban" and record["template_check"] is True
    assert sample.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED), record["error"]
    assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length > 0
    prompt = sample.tokens[: len(sample.tokens) - sample.response_length]
    assert codec.decode(prompt, skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    assert all(math.isfinite(v) for v in sample.rollout_log_probs)
    assert all(lp == 0.0 for lp, m in zip(sample.rollout_log_probs, sample.loss_mask, strict=True) if m == 0)
    train = sample.multimodal_train_inputs
    assert set(train) == {"pixel_values", "image_grid_thw"} and all(
        isinstance(v, torch.Tensor) for v in train.values()
    )
    grids = train["image_grid_thw"].tolist()
    assert train["pixel_values"].shape[0] == sum(math.prod(g) for g in grids)
    assert sample.tokens.count(codec.image_token_id) == sum(math.prod(g) // 4 for g in grids)
    assert len(sample.multimodal_inputs["images"]) == len(grids)
    assert sample.reward == record["reward"] and isinstance(sample.reward, float)
    assert record["num_turns"] == len(record["turns"]) >= 2
    assert record["turns"][0]["metrics"]["format_valid"] is True
    assert record["reset_info"]["optimal_moves"] >= 1
    assert asyncio.run(hook.reward(args, sample)) == sample.reward


def test_the_sample_names_its_env_and_geo3k_scores_the_right_answer(served):
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="vlm_envs.envs.sokoban", max_turns=4)
    problem = generate_problem(9)  # a dataset row as slime loads it: prompt, label, images
    sample = Sample(
        index=1,
        prompt=problem.text,
        label=problem.answer,
        multimodal_inputs={"images": list(problem.images)},
        metadata={"env": "geo3k"},
    )
    answer = problem.answer
    script(server, codec, Geo3kEnv.tool_call(answer), f"The answer is \\boxed{{{answer}}}.")
    run(args, sample)
    record = sample.metadata["vlm_envs"]
    assert record["env"] == "geo3k"
    assert sample.status is Sample.Status.COMPLETED, record["error"]
    assert sample.reward == 1.0 and record["metrics"]["correct"] is True
    assert sample.loss_mask.count(0) > 0  # the tool observation is in the response, masked


def test_no_env_anywhere_fails_the_sample_and_says_how_to_set_it(served):
    server, _ = served
    sample = Sample(index=2)
    run(slime_args(server), sample)
    assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
    error = sample.metadata["vlm_envs"]["error"]
    assert "rollout_interaction_env_path" in error and "--custom-config-path" in error


def test_an_unknown_env_name_fails_the_sample(served):
    server, _ = served
    sample = Sample(index=3, metadata={"env": "sokobam"})
    run(slime_args(server, max_turns=2), sample)
    assert sample.status is Sample.Status.FAILED and "sokobam" in sample.metadata["vlm_envs"]["error"]


def test_legacy_sample_without_append_response_tokens_gets_the_same_fields(served):
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=2)
    samples = []
    for cls in (Sample, LegacySample):
        sample = cls(index=4, group_index=2, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
        script(server, codec, "<answer>Up</answer>", "<answer>Down</answer>")
        run(args, sample)
        samples.append(sample)
    new, old = samples
    assert not hasattr(old, "append_response_tokens")
    for name in (
        "tokens",
        "response_length",
        "loss_mask",
        "rollout_log_probs",
        "status",
        "reward",
        "response",
    ):
        assert getattr(new, name) == getattr(old, name), name


def test_slime_abort_flag_aborts_the_sample(served):
    server, _ = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=3)
    GenerateState(args).aborted = True
    sample = Sample(index=5, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
    run(args, sample)
    assert sample.status is Sample.Status.ABORTED
    assert sample.response_length == len(sample.loss_mask) == len(sample.rollout_log_probs) == 0


def test_reward_can_be_left_to_slime(served):
    server, _ = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=1, vlm_envs_set_reward=False)
    sample = Sample(index=6, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
    run(args, sample)
    assert sample.reward is None
    assert asyncio.run(hook.reward(args, sample)) == sample.metadata["vlm_envs"]["reward"]


def test_server_down_fails_with_an_explicit_reward():
    args = SimpleNamespace(
        sglang_router_ip="127.0.0.1",
        sglang_router_port=9,
        rollout_temperature=1.0,
        rollout_max_response_len=16,
        rollout_interaction_env_path="sokoban",
        max_turns=2,
    )
    sample = Sample(index=7, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
    run(args, sample, {"max_new_tokens": 16})
    assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
    assert "engine" in sample.metadata["vlm_envs"]["error"]


class RefusingSample(Sample):
    """A Sample whose append_response_tokens rejects the data, as slime's own checks can."""

    def append_response_tokens(self, args=None, **kwargs):
        if not kwargs.get("trainable", True):
            raise ValueError("non-trainable tokens refused")
        super().append_response_tokens(args, **kwargs)


def test_a_sample_that_refuses_the_data_fails_cleanly(served):
    server, codec = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", max_turns=2)
    # a level that "Up" does not solve: the refused observation after it must come (an unseeded
    # level, solved by that one move about once in 45, ended the episode before it)
    sample = RefusingSample(
        index=8, group_index=2, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}}
    )
    script(server, codec, "<answer>Up</answer>", "<answer>Down</answer>")
    run(args, sample)
    assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
    assert "refused" in sample.metadata["vlm_envs"]["error"]
    assert sample.response_length == len(sample.loss_mask) == len(sample.rollout_log_probs) == 0
    assert codec.decode(sample.tokens, skip_special_tokens=False).endswith("<|im_start|>assistant\n")


def test_worker_processes_fill_the_same_sample(served):
    """``vlm_envs_workers: 2`` in the YAML: episodes play in worker processes, the Sample is the same."""
    server, _ = served
    base = dict(rollout_interaction_env_path="sokoban", max_turns=3)
    filled = []
    for workers in (0, 2):
        GenerateState.forget()
        args = slime_args(server, **base, vlm_envs_workers=workers)
        sample = Sample(
            index=7, group_index=11, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}}
        )
        filled.append(run(args, sample))
    local, remote = filled
    assert remote.metadata["vlm_envs"]["error"] == local.metadata["vlm_envs"]["error"]
    for name in ("tokens", "response", "response_length", "loss_mask", "status", "reward"):
        assert getattr(remote, name) == getattr(local, name), name
    assert remote.rollout_log_probs == pytest.approx(local.rollout_log_probs, abs=1e-6)
    for key in ("pixel_values", "image_grid_thw"):
        assert torch.equal(remote.multimodal_train_inputs[key], local.multimodal_train_inputs[key])
    assert [t["metrics"] for t in remote.metadata["vlm_envs"]["turns"]] == [
        t["metrics"] for t in local.metadata["vlm_envs"]["turns"]
    ]


def test_a_negative_worker_count_fails_the_sample(served):
    server, _ = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", vlm_envs_workers=-1)
    sample = run(args, Sample(index=8))
    assert (
        sample.status is Sample.Status.FAILED and "vlm_envs_workers" in sample.metadata["vlm_envs"]["error"]
    )


@pytest.mark.parametrize("workers", [0, 1])
def test_the_yaml_deadlines_reach_the_engine(served, workers):
    """``vlm_envs_read_timeout`` / ``vlm_envs_turn_timeout`` from the YAML bound the turn, in this
    process and in worker processes alike."""
    server, _ = served
    base = dict(rollout_interaction_env_path="sokoban", max_turns=2, vlm_envs_workers=workers)
    cases = [
        (
            Fault("delay", seconds=5.0),
            {"vlm_envs_turn_timeout": 1},
            "no complete reply within turn_timeout=1 s",
        ),
        (
            Fault("stall", seconds=5.0),
            {"vlm_envs_read_timeout": 0.3, "vlm_envs_turn_timeout": 30},
            "the reply made no progress for read_timeout=0.3 s",
        ),
    ]
    for fault, yaml, error in cases:
        server.clear_faults()
        server.inject(fault, times=5)
        sample = Sample(index=9, metadata={"env_config": {"grid_size": [6, 6], "num_boxes": 1}})
        run(slime_args(server, **base, **yaml), sample)
        server.clear_faults()
        record = sample.metadata["vlm_envs"]
        assert sample.status is Sample.Status.FAILED and sample.reward == 0.0
        assert record["error"].startswith("engine: EngineTimeout: ") and error in record["error"]
        assert sample.response_length == len(sample.loss_mask) == len(sample.rollout_log_probs) == 0


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("vlm_envs_turn_timeout", -1),
        ("vlm_envs_read_timeout", "60"),
        ("vlm_envs_turn_timeout", float("inf")),
        ("vlm_envs_max_body_bytes", 0),
    ],
)
def test_a_bad_deadline_in_the_yaml_fails_the_sample_and_names_the_key(served, key, value):
    server, _ = served
    args = slime_args(server, rollout_interaction_env_path="sokoban", **{key: value})
    sample = run(args, Sample(index=10))
    assert sample.status is Sample.Status.FAILED and key in sample.metadata["vlm_envs"]["error"]
