"""slime's ``--partial-rollout`` through the hook, in slime's order of events (the stand-in follows
``generate_and_rm``, ``generate_and_rm_group`` and ``abort``): a rollout ends with groups still running,
slime aborts them and keeps them for its buffer, the next rollout hands the ABORTED sample back to the
hook, which goes on from its last finished turn. Against the tiny model over HTTP, in this process and
in a worker process, the resumed Sample equals the uninterrupted episode token for token."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle

import pytest
import torch
from rollout_helpers import slime_args
from slime.rollout.sglang_rollout import GenerateState, abort, generate_and_rm, generate_and_rm_group
from slime.utils.types import Sample

from vlm_envs.rollout import contract
from vlm_envs.rollout import slime as hook
from vlm_envs.testing import Fault

MOVES = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Down</answer>", "<answer>Right</answer>"]
ROW = {"seed": 5, "env_config": {"grid_size": [6, 6], "num_boxes": 1}}
PARAMS = {"temperature": 1.0, "max_new_tokens": 1024}
#: A reply held this long is in flight when slime aborts: the episode stops before its next turn.
HOLD_S = 1.0
EXECUTORS = {"in process": {}, "worker process": {"vlm_envs_workers": 1}}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def make_args(server, masked: bool = False, **overrides):
    """slime's args with ``--partial-rollout`` (and ``--mask-offpolicy-in-partial-rollout``)."""
    values = dict(
        custom_generate_function_path="vlm_envs.rollout.slime.generate",
        rollout_interaction_env_path="sokoban",
        max_turns=4,
        partial_rollout=True,
        mask_offpolicy_in_partial_rollout=masked,
    )
    return slime_args(server, **{**values, **overrides})


def new_sample() -> Sample:
    return Sample(index=0, group_index=3, metadata=copy.deepcopy(ROW))


def replies(codec, texts=MOVES) -> list[list[int]]:
    return [[*codec.tokenize(text), codec.end_of_turn_id] for text in texts]


def answer(server, ids_list, hold_at: int | None = None) -> None:
    """The server answers the next requests with these replies (the one at ``hold_at`` held)."""
    for i, ids in enumerate(ids_list):
        server.inject(Fault("tokens", token_ids=tuple(ids), seconds=HOLD_S if i == hold_at else 0.0))


async def interrupted(server, args, sample, requests: int) -> Sample:
    """One slime rollout that ends while ``sample``'s group runs: once the engine has seen
    ``requests`` requests, slime aborts; the sample comes back from ``abort`` for the buffer, and the
    next rollout starts (``GenerateState.reset``)."""
    state = GenerateState(args)
    state.pendings = {asyncio.ensure_future(generate_and_rm_group(args, [sample], dict(PARAMS)))}
    while len(server.requests) < requests:
        await asyncio.sleep(0.01)
    groups = await abort(args, rollout_id=7)
    state.reset()
    ((back,),) = groups
    assert back.status is Sample.Status.ABORTED and back.metadata["start_rollout_id"] == 7
    json.dumps(back.metadata)  # everything the hook keeps there is plain JSON
    return pickle.loads(pickle.dumps(back))  # as a buffer saved to disk would hand it back


def run(coro_fn):
    async def main():
        try:
            return await coro_fn()
        finally:
            await hook.close()

    return asyncio.run(main())


def assert_same_episode(resumed: Sample, ref: Sample, codec, kept: int, masked: bool) -> None:
    """``resumed`` equals the uninterrupted ``ref``: tokens, text, log probs, images and tensors, status,
    reward and turn records; its loss mask too, but for the zeros slime wrote over the ``kept`` tokens."""
    for name in ("tokens", "response", "response_length", "status", "reward"):
        assert getattr(resumed, name) == getattr(ref, name), name
    assert resumed.rollout_log_probs == pytest.approx(ref.rollout_log_probs, abs=1e-5)
    assert resumed.loss_mask == ([0] * kept + ref.loss_mask[kept:] if masked else ref.loss_mask)
    for key in ("pixel_values", "image_grid_thw"):
        assert torch.equal(resumed.multimodal_train_inputs[key], ref.multimodal_train_inputs[key])
    images = resumed.multimodal_inputs["images"]
    assert [im.tobytes() for im in images] == [im.tobytes() for im in ref.multimodal_inputs["images"]]
    assert "vlm_envs_images" not in resumed.multimodal_inputs
    ours, theirs = resumed.metadata["vlm_envs"], ref.metadata["vlm_envs"]
    for key in ("status", "num_turns", "reward_breakdown", "metrics", "template_check", "reset_info"):
        assert ours[key] == theirs[key], key
    assert [t["metrics"] for t in ours["turns"]] == [t["metrics"] for t in theirs["turns"]]
    assert ours["template_check"] is True and ours["resumed"]["response_tokens"] == kept
    assert contract.sample_violations(resumed, codec.token_space, kept=kept if masked else 0) == []


@pytest.mark.parametrize("masked", [False, True], ids=["mask kept", "mask-offpolicy"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_episode_aborted_between_turns_resumes_at_the_next_turn(served, executor, masked):
    server, codec = served
    args = make_args(server, masked, **EXECUTORS[executor])
    ids = replies(codec)

    async def scenario():
        start = len(server.requests)
        answer(server, ids)
        ref = await generate_and_rm(args, new_sample(), PARAMS)
        ref_requests = server.requests[start:]
        assert ref.metadata["vlm_envs"]["num_turns"] == 4, ref.metadata["vlm_envs"]

        start = len(server.requests)
        answer(server, ids[:2], hold_at=1)  # slime aborts while turn 1's reply is in flight
        back = await interrupted(server, args, new_sample(), start + 2)
        record = back.metadata["vlm_envs"]
        assert record["status"] == "aborted" and record["num_turns"] == 2 and record["resume"]["cut"] is None
        kept = back.response_length
        assert back.tokens == ref.tokens[: len(back.tokens)]

        start = len(server.requests)
        answer(server, ids[2:])
        resumed = await generate_and_rm(args, back, dict(PARAMS))
        sent = server.requests[start:]
        return ref, ref_requests, resumed, sent, kept

    ref, ref_requests, resumed, sent, kept = run(scenario)
    # no request for the kept turns: the first one sent is the uninterrupted episode's third, whole
    assert [r["input_ids"] for r in sent] == [r["input_ids"] for r in ref_requests[2:]]
    assert [r["image_data"] for r in sent] == [r["image_data"] for r in ref_requests[2:]]
    assert [r["sampling_params"] for r in sent] == [r["sampling_params"] for r in ref_requests[2:]]
    assert_same_episode(resumed, ref, codec, kept, masked)
    assert resumed.metadata["vlm_envs"]["resumed"] == {
        "turns": 2,
        "response_tokens": kept,
        "generated_tokens": len(ids[0]) + len(ids[1]),
    }


@pytest.mark.parametrize("partial", [0, 4], ids=["no tokens", "4 tokens"])
@pytest.mark.parametrize("masked", [False, True], ids=["mask kept", "mask-offpolicy"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_episode_aborted_inside_a_turn_goes_on_from_the_tokens_the_engine_returned(
    served, executor, masked, partial
):
    server, codec = served
    args = make_args(server, masked, **EXECUTORS[executor])
    ids = replies(codec)

    async def scenario():
        start = len(server.requests)
        answer(server, ids)
        ref = await generate_and_rm(args, new_sample(), PARAMS)
        ref_requests = server.requests[start:]

        start = len(server.requests)
        answer(server, ids[:2])
        server.inject(Fault("abort", token_ids=tuple(ids[2]), size=partial))  # SGLang's reply to an abort
        back = await interrupted(server, args, new_sample(), start + 3)
        assert back.metadata["vlm_envs"]["resume"]["cut"] == partial
        kept = back.response_length

        start = len(server.requests)
        answer(server, [ids[2][partial:], *ids[3:]])
        resumed = await generate_and_rm(args, back, dict(PARAMS))
        return ref, ref_requests, resumed, server.requests[start:], kept

    ref, ref_requests, resumed, sent, kept = run(scenario)
    first, *rest = sent
    assert first["input_ids"] == ref_requests[2]["input_ids"] + ids[2][:partial]  # the partial tokens kept
    budget = ref_requests[2]["sampling_params"]["max_new_tokens"]
    assert first["sampling_params"]["max_new_tokens"] == budget - partial
    assert [r["input_ids"] for r in rest] == [r["input_ids"] for r in ref_requests[3:]]
    assert_same_episode(resumed, ref, codec, kept, masked)
    assert resumed.metadata["vlm_envs"]["resumed"]["turns"] == 2
