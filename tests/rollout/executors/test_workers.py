"""Episodes in worker processes: the same trajectories as on the caller's loop, and failures contained."""

import asyncio
import functools
import gc
import os
import pickle
import signal
import time

import numpy as np
import pytest
import torch
from rollout_helpers import (
    SAMPLING,
    SOKOBAN,
    assert_plays_as_on_the_callers_loop,
    assert_trainer_invariants,
    run_jobs,
)

from vlm_envs import build_env
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors.wire import dumps
from vlm_envs.rollout.executors.worker_process import YOUNG_COLLECTION_EVERY
from vlm_envs.rollout.executors.workers import EpisodeJob, EpisodeWorkers
from vlm_envs.rollout.images import stack_pixel_values
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import ScriptedEngine


@pytest.fixture(scope="module")
def pool(served):
    server, codec = served
    with EpisodeWorkers(2, codec.processor, functools.partial(SGLangEngine, server.url)) as workers:
        yield workers


def test_worker_trajectories_equal_those_played_on_the_callers_loop(served, pool):
    server, codec = served
    assert_plays_as_on_the_callers_loop(pool, server, codec)


def test_workers_carry_back_the_turn_samples_of_a_windowed_episode(served, pool):
    server, codec = served
    config = EpisodeConfig(max_turns=3, max_new_tokens=24, history="window:1")
    job = EpisodeJob("sokoban", SOKOBAN, seed=1, config=config, sampling_params=SAMPLING)
    (theirs,) = run_jobs(pool, job)

    async def local():
        async with SGLangEngine(server.url) as engine:
            env = build_env("sokoban", **SOKOBAN)
            return await run_episode(env, engine, codec, seed=1, config=config, sampling_params=SAMPLING)

    ours = asyncio.run(local())
    mine, yours = ours.turn_samples(), theirs.turn_samples()
    assert len(mine) == len(yours) == len(ours.turns) > 0
    for a, b in zip(mine, yours, strict=True):
        assert (a.turn, a.context.turns, a.tokens, a.loss_mask) == (
            b.turn,
            b.context.turns,
            b.tokens,
            b.loss_mask,
        )
        assert torch.equal(a.train_inputs()["pixel_values"], b.train_inputs()["pixel_values"])


def test_many_episodes_of_two_envs_across_workers_keep_the_invariants(served, pool):
    _, codec = served
    config = EpisodeConfig(max_turns=2, max_new_tokens=24)
    jobs = [
        EpisodeJob("sokoban" if i % 2 else "geo3k", SOKOBAN if i % 2 else {}, seed=i, config=config)
        for i in range(12)
    ]
    trajs = run_jobs(pool, *jobs)
    assert all(t.status in (Status.COMPLETED, Status.TRUNCATED) for t in trajs), [t.error for t in trajs]
    for traj in trajs:
        assert_trainer_invariants(traj, codec)
    assert all(t.images for t in trajs[1::2]) and not any(t.images for t in trajs[::2] if not t.turns)


def test_training_tensors_arrive_as_views_of_a_workers_shared_memory(pool):
    config = EpisodeConfig(max_turns=3, max_new_tokens=24)
    job = EpisodeJob("sokoban", SOKOBAN, seed=5, config=config, sampling_params=SAMPLING)
    (traj,) = run_jobs(pool, job)
    pixels = traj.train_inputs()["pixel_values"]
    arenas = [np.frombuffer(w.receiver.arena._map, dtype=np.uint8) for w in pool._workers if w is not None]
    assert any(a.ctypes.data <= pixels.data_ptr() < a.ctypes.data + a.nbytes for a in arenas)
    assert torch.equal(pixels, stack_pixel_values(traj.images))  # the rows the caller would make


def test_a_pool_bounded_to_one_episode_per_worker_plays_every_job(served):
    _, codec = served
    answer = [[*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]]
    engine = functools.partial(ScriptedEngine, answer, 0.01)
    config = EpisodeConfig(max_turns=2, max_new_tokens=16)
    with EpisodeWorkers(2, codec.processor, engine, max_in_flight=1) as workers:
        trajs = run_jobs(workers, *(EpisodeJob("sokoban", SOKOBAN, seed=i, config=config) for i in range(5)))
        assert workers._slots.load == [0, 0]  # every slot given back
    assert [t.status for t in trajs] == [Status.TRUNCATED] * 5


def test_an_unknown_env_fails_its_episode_and_the_pool_goes_on(pool):
    bad, good = run_jobs(
        pool,
        EpisodeJob("no-such-env", seed=0),
        EpisodeJob("sokoban", SOKOBAN, seed=0, config=EpisodeConfig(max_turns=1, max_new_tokens=8)),
    )
    assert bad.status is Status.FAILED and "no-such-env" in bad.error and bad.reward == 0.0
    assert good.status in (Status.COMPLETED, Status.TRUNCATED)


def test_a_trajectory_that_cannot_be_pickled_fails_cleanly(pool):
    """An env whose info holds a lambda: the episode FAILS with the reason instead of hanging."""
    job = EpisodeJob("toyenvs.unpicklable", seed=0, config=EpisodeConfig(max_turns=1, max_new_tokens=8))
    (traj,) = run_jobs(pool, job)
    assert traj.status is Status.FAILED and "cannot be sent back" in traj.error


def test_a_worker_tunes_its_own_collector_and_leaves_the_callers_alone(pool):
    """Workers play episodes and nothing else: what they hold once started is frozen out of the
    collector's way and young collections come less often. The trainer's process is not touched."""
    callers = gc.get_threshold()
    job = EpisodeJob("toyenvs.collector", seed=0, config=EpisodeConfig(max_turns=1, max_new_tokens=8))
    (traj,) = run_jobs(pool, job)
    assert traj.status is not Status.FAILED, traj.error
    assert traj.reset_info["young_threshold"] == YOUNG_COLLECTION_EVERY != callers[0]
    assert traj.reset_info["frozen"] > 0
    assert gc.get_threshold() == callers


@pytest.fixture
def scripted(served):
    """One worker whose engine answers a wall move in 50 ms: long, predictable episodes."""
    _, codec = served
    answer = [[*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]]
    with EpisodeWorkers(1, codec.processor, functools.partial(ScriptedEngine, answer, 0.05)) as workers:
        (warm,) = run_jobs(workers, EpisodeJob("sokoban", SOKOBAN, seed=0, config=EpisodeConfig(max_turns=1)))
        assert warm.status is Status.TRUNCATED  # the worker is up
        yield workers


def test_the_callers_abort_flag_aborts_running_episodes(scripted):
    aborted = False
    config = EpisodeConfig(max_turns=1000, max_new_tokens=16)

    async def main():
        nonlocal aborted
        jobs = [EpisodeJob("sokoban", SOKOBAN, seed=i, config=config) for i in (1, 2)]
        tasks = [asyncio.ensure_future(scripted.run(job, lambda: aborted)) for job in jobs]
        await asyncio.sleep(1)  # some turns in
        aborted = True
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)

    trajs = asyncio.run(main())
    assert all(t.status is Status.ABORTED and t.error == "aborted by the trainer" for t in trajs)
    assert all(0 < len(t.turns) < 1000 for t in trajs)


def test_closing_the_pool_fails_the_running_episodes(scripted):
    config = EpisodeConfig(max_turns=1000, max_new_tokens=16)

    async def main():
        task = asyncio.ensure_future(scripted.run(EpisodeJob("sokoban", SOKOBAN, seed=0, config=config)))
        await asyncio.sleep(1)
        await asyncio.get_running_loop().run_in_executor(None, scripted.close)
        return await asyncio.wait_for(task, timeout=30)

    traj = asyncio.run(main())
    assert traj.status is Status.FAILED and "the worker pool was closed" in traj.error


def test_a_killed_worker_fails_its_episodes_and_is_replaced(scripted):
    config = EpisodeConfig(max_turns=1000, max_new_tokens=16)

    async def main():
        task = asyncio.ensure_future(scripted.run(EpisodeJob("sokoban", SOKOBAN, seed=0, config=config)))
        await asyncio.sleep(1)  # some turns in
        (worker,) = scripted._workers
        os.kill(worker.process.pid, signal.SIGKILL)
        return await asyncio.wait_for(task, timeout=30)

    killed = asyncio.run(main())
    assert killed.status is Status.FAILED and "worker process ended (exit code -9)" in killed.error
    short = EpisodeConfig(max_turns=2, max_new_tokens=16)
    (again,) = run_jobs(scripted, EpisodeJob("sokoban", SOKOBAN, seed=0, config=short))
    assert again.status is Status.TRUNCATED and len(again.turns) == 2


def test_a_worker_blocked_by_a_step_that_never_returns_is_killed_and_replaced(served):
    _, codec = served
    engine = functools.partial(
        ScriptedEngine, [[*codec.tokenize("<answer>red</answer>"), codec.end_of_turn_id]]
    )
    config = EpisodeConfig(max_turns=2, max_new_tokens=16)
    with EpisodeWorkers(1, codec.processor, engine, stuck_after_s=3) as workers:
        (warm,) = run_jobs(workers, EpisodeJob("toyenvs.colors", seed=0, config=config))
        assert warm.status in (Status.COMPLETED, Status.TRUNCATED)  # the worker is up
        start = time.monotonic()
        hung, beside = run_jobs(
            workers,
            EpisodeJob("toyenvs.hangs", seed=0, config=config),
            EpisodeJob("toyenvs.colors", seed=1, config=config),  # same worker: held by the hang
        )
        assert time.monotonic() - start < 30
        for traj in (hung, beside):
            assert traj.status is Status.FAILED and "blocked for over 3 s" in traj.error
        (after,) = run_jobs(workers, EpisodeJob("toyenvs.colors", seed=2, config=config))
        assert after.status in (Status.COMPLETED, Status.TRUNCATED)  # a new worker took over


def test_a_worker_that_cannot_start_fails_every_episode_at_once():
    """A processor without a chat template: the codec cannot be built in the worker."""
    from vlm_envs.testing import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    tokenizer.chat_template = None
    with EpisodeWorkers(1, tokenizer, functools.partial(ScriptedEngine, [[0]])) as workers:
        start = time.monotonic()
        first = run_jobs(workers, EpisodeJob("sokoban", SOKOBAN, seed=0))[0]
        (worker,) = workers._workers
        second = run_jobs(workers, EpisodeJob("sokoban", SOKOBAN, seed=0))[0]
        assert workers._workers == [worker]  # not started again to fail the same way
        assert time.monotonic() - start < 60
    for traj in (first, second):
        assert traj.status is Status.FAILED and "chat template" in traj.error


def test_pickled_images_carry_no_pixel_rows_and_make_the_same_ones(served):
    _, codec = served
    env = build_env("sokoban", **SOKOBAN)
    obs, _ = env.reset(seed=3)
    processed = codec.process_image(obs.images[0])
    rows = processed.pixel_values
    data = dumps(processed)
    assert len(data) < rows.numel()  # the image's bytes, not the float rows (8x as many)
    again = pickle.loads(data)
    assert torch.equal(again.pixel_values, rows) and again.grid_thw == processed.grid_thw


def test_a_job_the_worker_cannot_read_fails_alone_and_the_worker_goes_on(scripted, tmp_path, monkeypatch):
    """A job holding an object of a module the caller has and the worker lacks (written here after
    the worker started): that episode FAILS at once naming the module and what to do; the jobs sent
    with it and after it play (before, the worker's inbox died and all of them hung). A trainer's
    sample of such a class travels as a plain snapshot of its task fields, so its job plays."""
    (tmp_path / "only_in_the_caller.py").write_text(
        "class Thing:\n    pass\n\n\nclass Sample:\n    def __init__(self, metadata):\n"
        "        self.metadata, self.status = metadata, Thing()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_in_the_caller import Sample, Thing

    config = EpisodeConfig(max_turns=2, max_new_tokens=16)
    bad = EpisodeJob("sokoban", {**SOKOBAN, "thing": Thing()}, seed=0, config=config)
    good = EpisodeJob("sokoban", SOKOBAN, seed=1, config=config)
    # the env's config comes from the sample's metadata: it reached the worker
    sampled = EpisodeJob(
        "sokoban", sample=Sample({"env_config": {**SOKOBAN, "grid_size": (7, 5)}}), config=config
    )

    async def play(*jobs):
        return await asyncio.wait_for(asyncio.gather(*(scripted.run(job) for job in jobs)), timeout=60)

    unreadable, beside, from_sample = asyncio.run(play(bad, good, sampled))
    assert unreadable.status is Status.FAILED and unreadable.reward == 0.0
    assert "No module named 'only_in_the_caller'" in unreadable.error and "PYTHONPATH" in unreadable.error
    assert beside.status is Status.TRUNCATED and len(beside.turns) == 2
    assert from_sample.status in (Status.COMPLETED, Status.TRUNCATED), from_sample.error
    assert from_sample.images[0].grid_thw != beside.images[0].grid_thw  # a 7x5 board, not 6x6
    (after,) = asyncio.run(play(good))
    assert after.status is Status.TRUNCATED and len(after.turns) == 2
