"""A misbehaving /generate server, one fault per broken rule, over real HTTP: every episode ends with
a status and an error that names the engine and the rule, and its trajectory stays self-consistent."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from rollout_helpers import EVERY, assert_trainer_invariants, script

from vlm_envs import build_env
from vlm_envs.rollout.engines.contract import EngineOutput, TransientEngineError
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import Fault

MAX_NEW = 8
QUICK = {"read_timeout": 0.5, "turn_timeout": 1.5, "max_retries": 1}


def play(server, codec, engine_kwargs, max_turns=1, seed=1):
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)

    async def main():
        async with SGLangEngine(server.url, backoff=0.01, **engine_kwargs) as engine:
            config = EpisodeConfig(max_turns=max_turns, max_new_tokens=MAX_NEW)
            return await run_episode(env, engine, codec, seed=seed, config=config)

    return asyncio.run(main())


CASES = [
    # (fault, times, engine settings, status, rule named in the error)
    (Fault("out_of_vocab"), 1, {}, Status.FAILED, "token id 570 at position"),
    (Fault("out_of_vocab", token_ids=(10**9,)), 1, {}, Status.FAILED, "token id 1000000000 at position"),
    (Fault("negative_id"), 1, {}, Status.FAILED, "(token ids in [0, vocab_size)): token id -1"),
    (Fault("float_id"), 1, {}, Status.FAILED, "(token ids are ints)"),
    (Fault("bool_id"), 1, {}, Status.FAILED, "(token ids are ints): token id True"),
    (Fault("positive_logprob"), 1, {}, Status.FAILED, "(log probs are finite and <= 0): log prob 5.0"),
    (Fault("huge_logprob"), 1, {}, Status.FAILED, "(log probs are finite and <= 0): log prob 1e+308"),
    (Fault("mismatched_lengths"), 1, {}, Status.FAILED, "(one log prob per token id)"),
    (Fault("unknown_finish"), 1, {}, Status.FAILED, "(a known finish reason): 'done'"),
    (Fault("too_many_tokens", size=5007), 1, {}, Status.TRUNCATED, "(at most max_new_tokens): 5007 tokens"),
    (Fault("huge_body"), 1, {}, Status.FAILED, "(a body of at most"),
    # slow replies: every request until cleared, so that no attempt of the turn can get a prompt reply
    (Fault("drip", seconds=0.05), EVERY, QUICK, Status.FAILED, "no complete reply within turn_timeout=1.5 s"),
    (Fault("delay", seconds=5.0), EVERY, QUICK, Status.FAILED, "no complete reply within turn_timeout=1.5 s"),
    (Fault("stall", seconds=5.0), EVERY, {**QUICK, "turn_timeout": 30.0}, Status.FAILED, "no progress"),
]


@pytest.mark.parametrize(("fault", "times", "settings", "status", "rule"), CASES, ids=lambda c: str(c)[:40])
def test_each_broken_rule_ends_the_episode_naming_the_engine_and_the_rule(
    served, fault, times, settings, status, rule
):
    server, codec = served
    server.inject(fault, times=times)
    traj = play(server, codec, settings)
    assert traj.status is status, traj.error
    assert traj.error.startswith("engine: ") and f"sglang {server.url}" in traj.error
    assert rule in traj.error
    assert traj.reward == 0.0 or status is Status.TRUNCATED
    assert_trainer_invariants(traj, codec)
    if status is Status.FAILED:  # nothing of the rejected reply is kept
        assert traj.response_length == 0 and traj.turns == []
    else:  # more tokens than asked: exactly the first max_new_tokens are kept
        assert traj.response_length == sum(traj.loss_mask) == MAX_NEW
        assert traj.turns[0].generated_tokens == MAX_NEW


def test_a_broken_reply_in_a_later_turn_keeps_only_the_turns_before_it(served):
    server, codec = served
    script(server, codec, "<answer>Up</answer>")
    server.inject(Fault("negative_id"))
    traj = play(server, codec, {}, max_turns=3)
    assert traj.status is Status.FAILED and "token id -1" in traj.error and traj.error.startswith("engine: ")
    assert [seg.trainable for seg in traj.segments] == [True, False]  # turn 1 and its observation
    assert len(traj.turns) == 1
    assert_trainer_invariants(traj, codec)


class OneReply:
    """An in-process Engine answering one fixed output (or raising), to check the loop's own guard."""

    name = "one-reply"

    def __init__(self, output):
        self.output = output

    async def generate(self, input_ids, images, sampling_params):
        if isinstance(self.output, Exception):
            raise self.output
        return self.output


@pytest.mark.parametrize(
    ("output", "status", "error"),
    [
        (EngineOutput([1, 570], [-0.5, -0.5], "stop"), Status.FAILED, "one-reply broke the reply contract"),
        (EngineOutput([1, 2, 3], [-0.5], "stop"), Status.FAILED, "(one log prob per token id)"),
        (
            EngineOutput(list(range(40)), [-0.5] * 40, "stop"),
            Status.TRUNCATED,
            "40 tokens for max_new_tokens=8",
        ),
        (None, Status.FAILED, "(an EngineOutput): generate returned a NoneType"),
        (ValueError("bad state"), Status.FAILED, "one-reply: ValueError: bad state"),
        (TransientEngineError("gone"), Status.FAILED, "TransientEngineError: gone"),
    ],
)
def test_every_engine_is_held_to_the_contract(served, output, status, error):
    _, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    config = EpisodeConfig(max_turns=2, max_new_tokens=MAX_NEW)
    traj = asyncio.run(run_episode(env, OneReply(output), codec, seed=1, config=config))
    assert traj.status is status and traj.error.startswith("engine: ") and error in traj.error
    assert_trainer_invariants(traj, codec)


def test_numpy_ids_from_an_in_process_engine_are_accepted_as_ints(served):
    _, codec = served
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1)
    ids = [*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]
    output = EngineOutput(list(np.array(ids, dtype=np.int64)), [-0.5] * len(ids), "stop")
    config = EpisodeConfig(max_turns=1, max_new_tokens=32)
    traj = asyncio.run(run_episode(env, OneReply(output), codec, seed=1, config=config))
    assert traj.status in (Status.TRUNCATED, Status.COMPLETED) and traj.error is None
    assert traj.response_ids == ids
    assert_trainer_invariants(traj, codec)
