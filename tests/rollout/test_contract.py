"""The Sample contract: each rule catches what breaks it, and no engine reply can make a trajectory
break it (a property test over hostile replies). The suite's conftest checks every other trajectory
and Sample it produces against the same contract."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vlm_envs import build_env
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.offload import INLINE
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import build_tiny_processor

SOKOBAN = {"grid_size": (5, 5), "num_boxes": 1, "cell_size": 16}


@pytest.fixture(scope="module")
def codec() -> ChatCodec:
    return ChatCodec(build_tiny_processor("qwen2_vl"))


def test_the_suite_watches_the_contract_log():
    assert Path(os.environ[contract.LOG_ENV]).is_file()  # set by tests/conftest.py


class ReplyEngine:
    """Answers every request with the same (possibly hostile) reply."""

    def __init__(self, output: EngineOutput) -> None:
        self.output = output

    async def generate(self, input_ids: Any, images: Any, sampling_params: Any) -> EngineOutput:
        return self.output


def play(codec: ChatCodec, output: EngineOutput, **config: Any):
    env = build_env("sokoban", **SOKOBAN)
    episode = EpisodeConfig(max_turns=3, max_new_tokens=16, **config)
    return asyncio.run(run_episode(env, ReplyEngine(output), codec, seed=1, config=episode, executor=INLINE))


def good_trajectory(codec: ChatCodec):
    ids = [*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]
    traj = play(codec, EngineOutput(ids, [-0.5] * len(ids), "stop"))
    assert traj.status in (Status.TRUNCATED, Status.COMPLETED) and len(traj.images) == 3
    assert contract.trajectory_violations(traj, codec.token_space) == []
    return traj


def first_turn(traj, **changes: Any) -> None:
    """Replace fields of the first generated segment."""
    traj.segments[0] = dataclasses.replace(traj.segments[0], **changes)


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda t, c: first_turn(t, ids=(10**9,)), "not an int"),
        (lambda t, c: first_turn(t, ids=(True,)), "not an int"),
        (lambda t, c: first_turn(t, log_probs=(5.0,) * len(t.segments[0].ids)), "finite and <= 0"),
        (lambda t, c: first_turn(t, log_probs=(math.nan,) * len(t.segments[0].ids)), "finite and <= 0"),
        (lambda t, c: t.images.pop(), "pad runs"),
        (lambda t, c: first_turn(t, ids=(c.image_token_id,) * len(t.segments[0].ids)), "image special token"),
    ],
)
def test_each_rule_catches_what_breaks_it(codec, breakage, message):
    traj = good_trajectory(codec)
    breakage(traj, codec)
    found = contract.trajectory_violations(traj, codec.token_space)
    assert any(message in v for v in found), found


def test_sample_rules_cover_lengths_status_and_pixel_rows(codec):
    from slime.utils.types import Sample

    traj = good_trajectory(codec)
    sample = Sample(
        tokens=traj.tokens,
        response_length=traj.response_length,
        loss_mask=traj.loss_mask,
        rollout_log_probs=traj.log_probs,
        multimodal_train_inputs=traj.train_inputs(),
        status=Sample.Status.TRUNCATED,
    )
    space = codec.token_space
    assert contract.sample_violations(sample, space) == []
    sample.rollout_log_probs = sample.rollout_log_probs[:-1]
    assert any("lengths differ" in v for v in contract.sample_violations(sample, space))
    sample.rollout_log_probs = traj.log_probs
    sample.status = Sample.Status.PENDING
    assert contract.sample_violations(sample, space) == ["status is PENDING"]
    sample.status = Sample.Status.COMPLETED
    sample.multimodal_train_inputs = {**traj.train_inputs(), "pixel_values": torch.zeros(3, 4)}
    assert any("pixel rows" in v for v in contract.sample_violations(sample, space))


def test_enforce_keeps_the_prompt_fails_the_episode_and_reports(codec, tmp_path, monkeypatch):
    log = tmp_path / "violations.jsonl"
    monkeypatch.setenv(contract.LOG_ENV, str(log))
    traj = good_trajectory(codec)
    traj.segments[0] = dataclasses.replace(traj.segments[0], ids=(10**9,) * len(traj.segments[0].ids))
    found = contract.enforce(traj, codec.token_space)
    assert found and traj.status is Status.FAILED and traj.error.startswith("contract: token id")
    assert traj.response_ids == [] and len(traj.images) == len(traj.prompt.images) == 1
    assert contract.trajectory_violations(traj, codec.token_space) == []
    assert json.loads(log.read_text())["violations"] == found


_IDS = st.one_of(
    st.integers(0, 600),
    st.integers(-(2**63), 2**63),
    st.booleans(),
    st.floats(allow_nan=True),
    st.sampled_from([151655, 151652, 151653]),  # Qwen image pad / vision start / end
)
_LOG_PROBS = st.one_of(st.floats(-30.0, 0.0), st.floats(allow_nan=True, allow_infinity=True))


@st.composite
def replies(draw: st.DrawFn) -> EngineOutput:
    n = draw(st.integers(0, 40))
    ids = draw(st.lists(_IDS, min_size=n, max_size=n))
    log_probs = draw(st.lists(_LOG_PROBS, min_size=n, max_size=n))
    return EngineOutput(ids, log_probs, draw(st.sampled_from(["stop", "length", "abort"])))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reply=replies())
def test_no_engine_reply_breaks_the_contract(codec, reply):
    """Whatever an engine answers, the trajectory keeps the contract: bad replies end the episode
    with the engine named, and nothing of them is kept under the loss mask."""
    traj = play(codec, reply)
    assert contract.trajectory_violations(traj, codec.token_space) == []
    if traj.status is Status.FAILED:
        assert traj.error and not traj.error.startswith(("env:", "contract:")), traj.error
