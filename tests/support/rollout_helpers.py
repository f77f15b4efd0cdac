"""Shared pieces of the rollout tests: scripted answers and the trainer's invariants."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

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
    """What slime's trainer checks: lengths, mask on generated tokens only, image blocks and tensors.

    Failed trajectories included: every id in ``[0, vocab)``, log probs finite and ``<= 0`` under
    mask 1 and 0.0 elsewhere, and exactly the generated tokens the turn records count under mask 1.
    """
    n = traj.response_length
    assert len(traj.loss_mask) == len(traj.log_probs) == n == len(traj.tokens) - len(traj.prompt_ids)
    vocab = len(codec.tokenizer)
    assert all(type(t) is int and 0 <= t < vocab for t in traj.tokens)
    for mask, lp in zip(traj.loss_mask, traj.log_probs, strict=True):
        assert type(lp) is float and math.isfinite(lp) and (lp <= 0.0 if mask else lp == 0.0)
    assert sum(traj.loss_mask) == sum(t.generated_tokens for t in traj.turns)
    offset = 0
    for seg in traj.segments:
        assert traj.loss_mask[offset : offset + len(seg.ids)] == [int(seg.trainable)] * len(seg.ids)
        if not seg.trainable:
            assert traj.log_probs[offset : offset + len(seg.ids)] == [0.0] * len(seg.ids)
        offset += len(seg.ids)
    assert all(math.isfinite(lp) for lp in traj.log_probs)
    # every image block: prod(grid)/merge^2 pad tokens, blocks in the order of the grids
    pad = codec.image_token_id
    runs, tokens, i = [], traj.tokens, 0
    while i < len(tokens):
        if tokens[i] == pad:
            j = i
            while j < len(tokens) and tokens[j] == pad:
                j += 1
            runs.append(j - i)
            i = j
        else:
            i += 1
    inputs = traj.train_inputs()
    grids = inputs["image_grid_thw"].tolist() if inputs else []
    assert runs == [math.prod(g) // 4 for g in grids]
    assert len(grids) == len(traj.images)
    if inputs:
        assert inputs["pixel_values"].shape[0] == sum(math.prod(g) for g in grids)
    assert not any(t in codec.special_image_ids for seg in traj.segments if seg.trainable for t in seg.ids)


def assert_sample_invariants(sample: Any, codec: ChatCodec) -> None:
    """:func:`assert_trainer_invariants` on a filled slime Sample (what the hook hands the trainer)."""
    n = sample.response_length
    assert len(sample.loss_mask) == len(sample.rollout_log_probs) == n <= len(sample.tokens)
    assert all(math.isfinite(lp) for lp in sample.rollout_log_probs)
    assert all(lp == 0.0 for lp, m in zip(sample.rollout_log_probs, sample.loss_mask, strict=True) if m == 0)
    inputs = sample.multimodal_train_inputs or {}
    grids = inputs["image_grid_thw"].tolist() if inputs else []
    assert _pad_runs(sample.tokens, codec.image_token_id) == [math.prod(g) // 4 for g in grids]
    if inputs:
        assert inputs["pixel_values"].shape[0] == sum(math.prod(g) for g in grids)
    response = sample.tokens[len(sample.tokens) - n :]
    generated = [t for t, m in zip(response, sample.loss_mask, strict=True) if m == 1]
    assert not any(t in codec.special_image_ids for t in generated)


def _pad_runs(tokens: list[int], pad: int | None) -> list[int]:
    runs, i = [], 0
    while i < len(tokens):
        if tokens[i] == pad:
            j = i
            while j < len(tokens) and tokens[j] == pad:
                j += 1
            runs.append(j - i)
            i = j
        else:
            i += 1
    return runs
