"""The trainer-neutral record: where each turn's reply lies in an output's response (``response_turns``)."""

from __future__ import annotations

import asyncio

import pytest
from sft_helpers import ReplyEngine

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.record import response_turns
from vlm_envs.testing import build_tiny_processor

SOKOBAN = {"grid_size": [5, 5], "num_boxes": 1, "cell_size": 16}
REPLIES = ["<answer>Up</answer>", "<answer>Down, Left</answer>", "<answer>Right</answer>"]


@pytest.fixture(scope="module")
def codec():
    return ChatCodec(build_tiny_processor("qwen2_vl"))


def played(codec: ChatCodec, history: str):
    config = EpisodeConfig(max_turns=len(REPLIES), history=history)
    env = build_env("sokoban", **SOKOBAN)
    return asyncio.run(run_episode(env, ReplyEngine(codec, list(REPLIES)), codec, seed=4, config=config))


def test_a_full_episode_names_each_replys_tokens_in_its_response(codec):
    traj = played(codec, "full")
    spans = response_turns(traj)
    assert [turn for turn, _, _ in spans] == list(range(len(traj.turns))) == [0, 1, 2]
    response, mask = traj.response_ids, traj.loss_mask
    for (_, start, end), record in zip(spans, traj.turns, strict=True):
        assert response[start:end] == list(record.reply.ids) and set(mask[start:end]) == {1}
    assert sum(end - start for _, start, end in spans) == sum(mask)  # every generated token, once


def test_a_turn_sample_is_its_one_reply(codec):
    traj = played(codec, "window:1")
    samples = traj.turn_samples()
    assert [response_turns(s) for s in samples] == [[[s.turn, 0, len(s.reply.ids)]] for s in samples]


def test_a_discarded_response_holds_no_reply(codec):
    traj = played(codec, "full")
    traj.discard_response("gone")
    assert response_turns(traj) == []
