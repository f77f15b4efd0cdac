"""slime's ``--partial-rollout`` through the hook, in slime's order of events (the stand-in follows
``generate_and_rm``, ``generate_and_rm_group`` and ``abort``): a rollout ends with groups still running,
slime aborts them and keeps them for its buffer, the next rollout hands the ABORTED sample back to the
hook, which goes on from its last finished turn. Against the tiny model over HTTP, in this process and
in a worker process, the resumed Sample equals the uninterrupted episode token for token."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from partial_helpers import PARAMS, answer, assert_same_episode, interrupted, partial_args
from rollout_helpers import script
from slime.rollout.sglang_rollout import GenerateState, generate_and_rm
from slime.utils.types import LegacySample, Sample

from vlm_envs import build_env
from vlm_envs.rollout import contract
from vlm_envs.rollout import slime as hook
from vlm_envs.snapshot import digest_of
from vlm_envs.testing import Fault

MOVES = ["<answer>Up</answer>", "<answer>Left</answer>", "<answer>Down</answer>", "<answer>Right</answer>"]
ROW = {"seed": 5, "env_config": {"grid_size": [6, 6], "num_boxes": 1}}
EXECUTORS = {"in process": {}, "worker process": {"vlm_envs_workers": 1}}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def new_sample() -> Sample:
    return Sample(index=0, group_index=3, metadata=copy.deepcopy(ROW))


def replies(codec, texts=MOVES) -> list[list[int]]:
    return [[*codec.tokenize(text), codec.end_of_turn_id] for text in texts]


def run(coro_fn):
    async def main():
        try:
            return await coro_fn()
        finally:
            await hook.close()

    return asyncio.run(main())


async def uninterrupted(server: Any, args: Any, ids: list[list[int]]) -> tuple[Any, list[dict]]:
    """The episode played whole with ``ids`` as its replies, and the requests it sent."""
    start = len(server.requests)
    answer(server, ids)
    ref = await generate_and_rm(args, new_sample(), PARAMS)
    return ref, server.requests[start:]


@pytest.mark.parametrize("masked", [False, True], ids=["mask kept", "mask-offpolicy"])
@pytest.mark.parametrize("executor", EXECUTORS)
def test_an_episode_aborted_between_turns_resumes_at_the_next_turn(served, executor, masked):
    server, codec = served
    args = partial_args(server, masked, **EXECUTORS[executor])
    ids = replies(codec)

    async def scenario():
        ref, ref_requests = await uninterrupted(server, args, ids)
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
    args = partial_args(server, masked, **EXECUTORS[executor])
    ids = replies(codec)

    async def scenario():
        ref, ref_requests = await uninterrupted(server, args, ids)

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


def test_a_greedy_engine_goes_on_from_a_cut_reply_as_if_never_cut(served):
    """No script: the tiny model generates greedily; cut at half its first reply, the resumed request
    generates the other half (from the prompt and the kept tokens), token for token."""
    server, codec = served
    args = partial_args(server)
    params = {"temperature": 0.0, "max_new_tokens": 48}

    async def scenario():
        ref = await generate_and_rm(args, new_sample(), dict(params))
        cut = ref.metadata["vlm_envs"]["turns"][0]["generated_tokens"] // 2
        start = len(server.requests)
        server.inject(Fault("abort", size=cut))
        back = await interrupted(server, args, new_sample(), start + 1, params)
        assert cut >= 4 and back.response_length == cut and back.metadata["vlm_envs"]["resume"]["cut"] == cut
        return ref, await generate_and_rm(args, back, dict(params)), cut

    ref, resumed, cut = run(scenario)
    assert_same_episode(resumed, ref, codec, cut, masked=False)


@pytest.fixture
def aborted(served):
    """A Sample slime aborted inside Sokoban's third turn (4 tokens kept), handed back as a buffer would."""
    server, codec = served
    args = partial_args(server)
    ids = replies(codec)

    async def scenario():
        start = len(server.requests)
        answer(server, ids[:2])
        server.inject(Fault("abort", token_ids=tuple(ids[2]), size=4))
        return await interrupted(server, args, new_sample(), start + 3)

    back = run(scenario)
    GenerateState.forget()
    return back


def resealed(state: dict) -> dict:
    """``state`` with its digest made again (a forger who knows the format)."""
    content = {k: v for k, v in state.items() if k != "digest"}
    return {**content, "digest": digest_of(content)}


def other_config_snapshot() -> dict:
    env = build_env("sokoban", grid_size=[7, 7], num_boxes=1)
    env.reset(seed=5)
    env.step(MOVES[0])
    return env.snapshot()


def forge_altered(back):
    back.metadata["vlm_envs"]["resume"]["cut"] = 2


def forge_truncated(back):
    del back.metadata["vlm_envs"]["resume"]["turns"]


def forge_snapshot(back):
    state = copy.deepcopy(back.metadata["vlm_envs"]["resume"])
    state["snapshot"]["state"]["replies"][0] = "<answer>Down</answer>"
    back.metadata["vlm_envs"]["resume"] = resealed(state)


def forge_foreign_snapshot(back):
    state = copy.deepcopy(back.metadata["vlm_envs"]["resume"])
    state["snapshot"] = other_config_snapshot()
    back.metadata["vlm_envs"]["resume"] = resealed(state)


def forge_tokens(back):
    back.tokens[-1] = back.tokens[-2]


def forge_mask(back):
    back.loss_mask[-5] = 1  # an observation token made trainable


def forge_deep(back):
    nested: list = []
    for _ in range(100):
        nested = [nested]
    back.metadata["vlm_envs"]["resume"]["prompt_messages"] = nested


def forge_state_key(back):
    state = copy.deepcopy(back.metadata["vlm_envs"]["resume"])
    state["turns"][0]["state_key"] = 12345
    back.metadata["vlm_envs"]["resume"] = resealed(state)


def forge_distance(back):
    state = copy.deepcopy(back.metadata["vlm_envs"]["resume"])
    state["turns"][0]["distance_to_goal"] = -7
    back.metadata["vlm_envs"]["resume"] = resealed(state)


FORGERIES = {
    "altered": (forge_altered, "altered or truncated"),
    "truncated": (forge_truncated, "not a vlm-envs resume state"),
    "snapshot altered": (forge_snapshot, "SnapshotError: the snapshot was altered"),
    "snapshot of another config": (
        forge_foreign_snapshot,
        "SnapshotError: a snapshot of another 'sokoban' config",
    ),
    "tokens changed": (forge_tokens, "tokens are not the ones"),
    "mask changed": (forge_mask, "not 0"),
    "deeply nested": (forge_deep, "nests deeper"),
    "state key not a str": (forge_state_key, "malformed state key or distance"),
    "distance below unreachable": (forge_distance, "malformed state key or distance"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_resume_state_fails_the_sample_cleanly(served, aborted, forgery):
    """Whatever was changed, the sample comes back FAILED with the reason, reward 0.0 and an empty,
    contract-keeping response; no request reaches the engine; nothing is raised into the trainer."""
    server, codec = served
    forge, reason = FORGERIES[forgery]
    forge(aborted)
    start = len(server.requests)
    out = run(lambda: generate_and_rm(partial_args(server), aborted, dict(PARAMS)))
    record = out.metadata["vlm_envs"]
    assert out.status is Sample.Status.FAILED and out.reward == 0.0
    assert record["error"].startswith("resume: ") and reason in record["error"], record["error"]
    assert len(server.requests) == start
    assert (
        out.response_length == 0
        and out.loss_mask == []
        and contract.sample_violations(out, codec.token_space) == []
    )


def test_a_sample_aborted_before_the_hook_ran_plays_from_the_start(served):
    """slime marks a sample ABORTED without calling the hook when the flag is already set: it has no
    resume state, and the next rollout plays it from turn 0."""
    server, codec = served
    args = partial_args(server)

    async def scenario():
        script(server, codec, *MOVES)
        ref = await generate_and_rm(args, new_sample(), dict(PARAMS))
        GenerateState(args).aborted = True
        back = await generate_and_rm(args, new_sample(), dict(PARAMS))
        assert back.status is Sample.Status.ABORTED and back.response_length == 0
        GenerateState(args).reset()
        script(server, codec, *MOVES)
        return ref, await generate_and_rm(args, back, dict(PARAMS))

    ref, out = run(scenario)
    assert out.metadata["vlm_envs"]["resumed"] is None
    for name in ("tokens", "loss_mask", "status", "reward"):
        assert getattr(out, name) == getattr(ref, name), name


def test_an_older_slime_sample_without_append_response_tokens_resumes_the_same(served):
    server, codec = served
    args = partial_args(server, masked=True)
    ids = replies(codec)

    async def scenario():
        filled = []
        for cls in (Sample, LegacySample):
            start = len(server.requests)
            answer(server, ids[:2])
            server.inject(Fault("abort", token_ids=tuple(ids[2]), size=4))
            back = await interrupted(
                server, args, cls(index=0, group_index=3, metadata=copy.deepcopy(ROW)), start + 3
            )
            answer(server, [ids[2][4:], *ids[3:]])
            filled.append(await generate_and_rm(args, back, dict(PARAMS)))
        return filled

    new, old = run(scenario)
    assert not hasattr(old, "append_response_tokens")
    for name in (
        "tokens",
        "response",
        "response_length",
        "loss_mask",
        "rollout_log_probs",
        "status",
        "reward",
    ):
        assert getattr(old, name) == getattr(new, name), name
    assert old.loss_mask[: old.metadata["vlm_envs"]["resumed"]["response_tokens"]].count(1) == 0
