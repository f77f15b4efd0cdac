"""Shared pieces of the rollout tests: scripted answers and the trainer's invariants."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.testing import Fault, SGLangTestServer


def slime_args(server: SGLangTestServer, **overrides: Any) -> SimpleNamespace:
    """slime's args as the hook reads them: the test server as the router, the stand-in's processor,
    the template check on; ``overrides`` win (they are the YAML's keys)."""
    host, port = server.url.removeprefix("http://").split(":")
    values = dict(
        sglang_router_ip=host,
        sglang_router_port=int(port),
        rollout_temperature=1.0,
        rollout_max_response_len=1024,
        rollout_max_context_len=None,
        hf_checkpoint="(built offline by the stand-in)",
        vlm_envs_check_template=True,
    )
    return SimpleNamespace(**{**values, **overrides})


def script(server: SGLangTestServer, codec: ChatCodec, *texts: str, eos: bool = True) -> None:
    """The server answers the next requests with these texts (scored by the model)."""
    for text in texts:
        ids = codec.tokenize(text) + ([codec.end_of_turn_id] if eos else [])
        server.inject(Fault("tokens", token_ids=tuple(ids)))


def assert_trainer_invariants(traj: Trajectory, codec: ChatCodec) -> None:
    """The Sample contract (:mod:`vlm_envs.rollout.contract`), failed trajectories included, and what
    a trajectory adds: the mask follows its segments, exactly the generated tokens the turn records
    count are under mask 1, and the training tensors hold one grid per image."""
    assert contract.trajectory_violations(traj, codec.token_space) == []
    assert all(type(lp) is float for lp in traj.log_probs)
    assert sum(traj.loss_mask) == sum(t.generated_tokens for t in traj.turns)
    offset = 0
    for seg in traj.segments:
        assert traj.loss_mask[offset : offset + len(seg.ids)] == [int(seg.trainable)] * len(seg.ids)
        offset += len(seg.ids)
    inputs = traj.train_inputs()
    grids = inputs["image_grid_thw"].tolist() if inputs else []
    assert len(grids) == len(traj.images)
    if inputs:
        assert inputs["pixel_values"].shape[0] == sum(math.prod(g) for g in grids)


def assert_sample_invariants(sample: Any, codec: ChatCodec) -> None:
    """The Sample contract on a filled slime Sample (what the hook hands the trainer)."""
    assert contract.sample_violations(sample, codec.token_space) == []
