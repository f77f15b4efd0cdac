"""What the ``--partial-rollout`` tests share: slime's args, the replies the test server answers with,
one slime rollout cut by slime's abort, and the comparison of a resumed Sample with the uninterrupted
episode."""

from __future__ import annotations

import asyncio
import json
import pickle
from typing import Any

import pytest
import torch
from rollout_helpers import slime_args
from slime.rollout.sglang_rollout import GenerateState, abort, generate_and_rm_group
from slime.utils.types import Sample

from vlm_envs.rollout import contract
from vlm_envs.testing import Fault, SGLangTestServer

#: Seconds a held reply waits: long enough for slime's abort to land while it is in flight.
HOLD_S = 1.0


def partial_args(server: Any, masked: bool = False, **overrides: Any) -> Any:
    """slime's args with ``--partial-rollout`` (and ``--mask-offpolicy-in-partial-rollout``), Sokoban."""
    values = dict(
        custom_generate_function_path="vlm_envs.rollout.slime.generate",
        rollout_interaction_env_path="sokoban",
        max_turns=4,
        partial_rollout=True,
        mask_offpolicy_in_partial_rollout=masked,
    )
    return slime_args(server, **{**values, **overrides})


def answer(server: Any, ids_list: list[list[int]], hold_at: int | None = None) -> None:
    """The server answers the next requests with these replies (the one at ``hold_at`` held)."""
    for i, ids in enumerate(ids_list):
        server.inject(Fault("tokens", token_ids=tuple(ids), seconds=HOLD_S if i == hold_at else 0.0))


PARAMS = {"temperature": 1.0, "max_new_tokens": 1024}


async def interrupted(
    server: SGLangTestServer, args: Any, sample: Sample, requests: int, params: dict = PARAMS
) -> Sample:
    """One slime rollout that ends while ``sample``'s group runs: once the engine has seen
    ``requests`` requests, slime aborts; the sample comes back from ``abort`` for the buffer, and the
    next rollout starts (``GenerateState.reset``)."""
    state = GenerateState(args)
    state.pendings = {asyncio.ensure_future(generate_and_rm_group(args, [sample], dict(params)))}
    while len(server.requests) < requests:
        await asyncio.sleep(0.01)
    groups = await abort(args, rollout_id=7)
    state.reset()
    ((back,),) = groups
    assert back.status is Sample.Status.ABORTED and back.metadata["start_rollout_id"] == 7
    json.dumps(back.metadata)  # everything the hook keeps there is plain JSON
    return pickle.loads(pickle.dumps(back))  # as a buffer saved to disk would hand it back


def assert_same_episode(resumed: Sample, ref: Sample, codec: Any, kept: int, masked: bool) -> None:
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
