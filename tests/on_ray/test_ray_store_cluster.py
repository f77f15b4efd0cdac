"""The object store and the actor count on the real two-node cluster: the store probes read the
cluster's own numbers, a pool counts what its episodes hold in the store, and an actor count no
cluster places (10,000,000 actors of 0 CPU) fails its episodes at once, nothing allocated for it."""

from __future__ import annotations

import asyncio
import functools
import tracemalloc

import pytest
from rollout_helpers import SOKOBAN, run_jobs

from vlm_envs.rollout.episode import EpisodeConfig
from vlm_envs.rollout.executors.ray_store import spilled_bytes, store_capacity
from vlm_envs.rollout.executors.ray_workers import RayEpisodeWorkers
from vlm_envs.rollout.executors.workers import EpisodeJob
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import ScriptedEngine

OBJECT_STORE_BYTES = 200_000_000  # per node, as tests/on_ray/conftest.py starts them


def test_the_store_probes_read_the_cluster(ray_cluster) -> None:
    assert store_capacity() == pytest.approx(2 * OBJECT_STORE_BYTES, rel=0.05)
    spilled = spilled_bytes()
    assert isinstance(spilled, int) and spilled >= 0


def test_a_pool_counts_its_episodes_bytes_and_in_flight_against_the_store(ray_cluster, served) -> None:
    _, codec = served
    answer = [[*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]]
    make_engine = functools.partial(ScriptedEngine, answer, 0.01)
    with RayEpisodeWorkers(2, codec.processor, make_engine, num_cpus=0.25) as pool:
        jobs = [EpisodeJob("sokoban", SOKOBAN, seed=i, config=EpisodeConfig(max_turns=2)) for i in range(6)]
        trajs = run_jobs(pool, *jobs)
    assert all(t.status is Status.TRUNCATED for t in trajs), [t.error for t in trajs]
    store = pool._store
    assert store.episodes == 6 and store.peak_in_flight == 6 and store.largest > 0
    assert store.needed() < store_capacity()  # six small episodes: nothing to say
    assert store.check() is None


def test_an_actor_count_no_cluster_places_fails_at_once_and_allocates_nothing(ray_cluster, served) -> None:
    _, codec = served
    tracemalloc.start()
    try:
        make_engine = functools.partial(ScriptedEngine, [[0]])
        pool = RayEpisodeWorkers(10_000_000, codec.processor, make_engine, num_cpus=0)

        async def play():
            return await asyncio.wait_for(pool.run(EpisodeJob("sokoban", SOKOBAN, seed=0)), timeout=60)

        with pool:
            traj = asyncio.run(play())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert traj.status is Status.FAILED
    assert "Ray actors asking nothing each (each counts as at least CPU=0.125: a process)" in traj.error
    assert "10000000 wanted, the cluster has room for 16" in traj.error
    assert peak < 50 << 20 and pool._actors == []  # was about 961 MB of per-actor state
