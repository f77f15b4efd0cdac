"""Shared pieces of the rollout tests: scripted answers and the trainer's invariants."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from vlm_envs import build_env
from vlm_envs.rollout import contract
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors.in_process import EpisodeExecutor
from vlm_envs.rollout.executors.worker_process import EpisodeJob
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.testing import Fault, SGLangTestServer

SAMPLING = {"temperature": 1.0}  # the test server seeds sampling by the input ids: reproducible
SOKOBAN = {"grid_size": (6, 6), "num_boxes": 1, "render_mode": "vision"}
EVERY = 1000  # faults queued for "every request": more requests than any test sends


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


def run_jobs(
    pool: EpisodeExecutor, *jobs: EpisodeJob, should_abort: Callable[[], bool] | None = None
) -> list[Trajectory]:
    """Play ``jobs`` at once on ``pool``; their trajectories in order."""

    async def main() -> list[Trajectory]:
        return await asyncio.gather(*(pool.run(job, should_abort=should_abort) for job in jobs))

    return asyncio.run(main())


def assert_plays_as_on_the_callers_loop(
    pool: EpisodeExecutor, server: SGLangTestServer, codec: ChatCodec
) -> None:
    """Four Sokoban vision episodes played by ``pool`` equal the same episodes played here: tokens,
    mask, log probs, turns, reward, training tensors and segment texts (made by ``pool``), each
    within the trainer's invariants."""
    config = EpisodeConfig(max_turns=3, max_new_tokens=24, check_template=True)
    jobs = [
        EpisodeJob("sokoban", SOKOBAN, seed=seed, config=config, sampling_params=SAMPLING)
        for seed in range(4)
    ]
    remote = run_jobs(pool, *jobs)

    async def local(seed: int | None) -> Trajectory:
        async with SGLangEngine(server.url) as engine:
            env = build_env("sokoban", **SOKOBAN)
            return await run_episode(env, engine, codec, seed=seed, config=config, sampling_params=SAMPLING)

    for job, theirs in zip(jobs, remote, strict=True):
        ours = asyncio.run(local(job.seed))
        assert theirs.status is ours.status and theirs.error == ours.error  # the random model may end it
        assert theirs.tokens == ours.tokens and theirs.loss_mask == ours.loss_mask
        assert theirs.log_probs == pytest.approx(ours.log_probs, abs=1e-6)
        assert [t.model_text for t in theirs.turns] == [t.model_text for t in ours.turns]
        assert [t.metrics for t in theirs.turns] == [t.metrics for t in ours.turns]
        assert theirs.reward == ours.reward and theirs.template_check.ok
        a, b = theirs.train_inputs(), ours.train_inputs()
        assert torch.equal(a["pixel_values"], b["pixel_values"])
        assert torch.equal(a["image_grid_thw"], b["image_grid_thw"])
        assert theirs._texts is not None  # made where the episode played, not by this caller
        assert theirs.segment_texts(codec) == ours.segment_texts(codec)
        assert_trainer_invariants(theirs, codec)
