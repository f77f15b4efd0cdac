"""Episodes on Ray actors over a real two-node cluster: the same trajectories as on the caller's
loop, actors on both nodes, a killed actor contained, the trainer's abort honoured."""

import asyncio
import functools
import re
import time

import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from rollout_helpers import (
    SOKOBAN,
    assert_plays_as_on_the_callers_loop,
    run_jobs,
)

from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig
from vlm_envs.rollout.executors.ray_workers import RayEpisodeWorkers
from vlm_envs.rollout.executors.worker_process import YOUNG_COLLECTION_EVERY
from vlm_envs.rollout.executors.workers import EpisodeJob
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import ScriptedEngine

LONG = EpisodeConfig(max_turns=1000, max_new_tokens=16)


def wait_until_the_cluster_is_idle(timeout_s=60.0):
    """Every CPU free again: the actors and tasks of earlier tests are gone (Ray frees them a
    little after they are killed), so SPREAD has both nodes to choose from."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0.0) < ray.cluster_resources().get("CPU", 0.0):
        assert time.monotonic() < deadline, f"the cluster stayed busy: {ray.available_resources()}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def pool(ray_cluster, served):
    server, codec = served
    wait_until_the_cluster_is_idle()
    make_engine = functools.partial(SGLangEngine, server.url)
    with RayEpisodeWorkers(2, codec.processor, make_engine, num_cpus=0.5) as actors:
        yield actors


@pytest.fixture
def scripted(ray_cluster, served):
    """Two actors whose engine answers a wall move in 50 ms: long, predictable episodes."""
    _, codec = served
    answer = [[*codec.tokenize("<answer>Up</answer>"), codec.end_of_turn_id]]
    make_engine = functools.partial(ScriptedEngine, answer, 0.05)
    with RayEpisodeWorkers(2, codec.processor, make_engine, num_cpus=0.25, max_in_flight=2) as actors:
        warm = run_jobs(
            actors,
            *(EpisodeJob("sokoban", SOKOBAN, seed=i, config=EpisodeConfig(max_turns=1)) for i in (0, 1)),
        )
        assert all(t.status is Status.TRUNCATED for t in warm)  # both actors are up
        yield actors


def test_the_actors_are_spread_over_both_nodes(pool):
    alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
    assert len(alive) == 2 and set(pool.node_ids()) == alive


def test_actor_trajectories_equal_those_played_on_the_callers_loop(served, pool):
    server, codec = served
    assert_plays_as_on_the_callers_loop(pool, server, codec)


def test_an_unknown_env_fails_its_episode_and_the_pool_goes_on(pool):
    bad, good = run_jobs(
        pool,
        EpisodeJob("no-such-env", seed=0),
        EpisodeJob("sokoban", SOKOBAN, seed=0, config=EpisodeConfig(max_turns=1, max_new_tokens=8)),
    )
    assert bad.status is Status.FAILED and "no-such-env" in bad.error and bad.reward == 0.0
    assert good.status in (Status.COMPLETED, Status.TRUNCATED)


def test_a_trajectory_that_cannot_be_pickled_fails_alone(pool):
    """An env whose info holds a lambda: that episode FAILS with the reason; the ones finishing
    with it (they may come back in the same batch) are unharmed."""
    config = EpisodeConfig(max_turns=1, max_new_tokens=8)
    bad, *good = run_jobs(
        pool,
        EpisodeJob("toyenvs.unpicklable", seed=0, config=config),
        *(EpisodeJob("sokoban", SOKOBAN, seed=seed, config=config) for seed in range(3)),
    )
    assert bad.status is Status.FAILED and "cannot be sent back" in bad.error
    assert all(t.status in (Status.COMPLETED, Status.TRUNCATED) and t.train_inputs() for t in good)


def test_an_actor_tunes_its_own_collector(pool):
    """An actor's process plays episodes and nothing else, as a worker process does."""
    job = EpisodeJob("toyenvs.collector", seed=0, config=EpisodeConfig(max_turns=1, max_new_tokens=8))
    (traj,) = run_jobs(pool, job)
    assert traj.status is not Status.FAILED, traj.error
    assert traj.reset_info["young_threshold"] == YOUNG_COLLECTION_EVERY
    assert traj.reset_info["frozen"] > 0


def test_a_killed_actor_fails_its_episodes_and_is_replaced(scripted):
    short = EpisodeConfig(max_turns=30, max_new_tokens=16)

    async def main():
        # least-loaded dispatch: jobs 0 and 2 go to actor 0, jobs 1 and 3 to actor 1
        configs = [LONG, short, LONG, short]
        jobs = [EpisodeJob("sokoban", SOKOBAN, seed=i, config=c) for i, c in enumerate(configs)]
        tasks = [asyncio.ensure_future(scripted.run(job)) for job in jobs]
        await asyncio.sleep(1)  # some turns in
        ray.kill(dead)
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)

    dead = scripted._actors[0]
    killed_a, done_a, killed_b, done_b = asyncio.run(main())
    for traj in (killed_a, killed_b):
        assert traj.status is Status.FAILED and "ActorDiedError" in traj.error and traj.reward == 0.0
    for traj in (done_a, done_b):
        assert traj.status is Status.TRUNCATED and len(traj.turns) == 30
    again = run_jobs(scripted, *(EpisodeJob("sokoban", SOKOBAN, seed=i, config=short) for i in range(4)))
    assert all(t.status is Status.TRUNCATED and len(t.turns) == 30 for t in again)
    # a new actor took the dead one's slot (on whichever node: SPREAD is best effort) and answers
    assert scripted._actors[0] is not dead and len(scripted.node_ids()) == 2


def test_the_callers_abort_flag_aborts_episodes_on_actors(scripted):
    aborted = False

    async def main():
        nonlocal aborted
        jobs = [EpisodeJob("sokoban", SOKOBAN, seed=i, config=LONG) for i in range(3)]
        tasks = [asyncio.ensure_future(scripted.run(job, lambda: aborted)) for job in jobs]
        await asyncio.sleep(1)  # some turns in
        aborted = True
        return await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)

    trajs = asyncio.run(main())
    assert all(t.status is Status.ABORTED and t.error == "aborted by the trainer" for t in trajs)
    assert all(0 < len(t.turns) < 1000 for t in trajs)


def test_episodes_beyond_the_in_flight_bound_wait_for_a_slot(scripted):
    """Two actors, two episodes each: the fifth to ninth wait, then play; none is lost."""
    config = EpisodeConfig(max_turns=3, max_new_tokens=16)
    trajs = run_jobs(scripted, *(EpisodeJob("sokoban", SOKOBAN, seed=i, config=config) for i in range(9)))
    assert [len(t.turns) for t in trajs] == [3] * 9 and all(t.status is Status.TRUNCATED for t in trajs)
    assert scripted._slots.load == [0, 0]


def test_a_job_an_actor_cannot_read_fails_alone_and_the_pool_goes_on(scripted, tmp_path, monkeypatch):
    """A job holding an object of a module only this driver has (the nodes' PYTHONPATH lacks it):
    that episode FAILS at once naming the module and what to do; the jobs of its batch and later
    ones play (before, the batch was swallowed and they all hung). A trainer's sample of such a
    class (as slime's Sample, when slime is on the driver only) travels as a plain snapshot."""
    (tmp_path / "only_on_the_driver.py").write_text(
        "class Thing:\n    pass\n\n\nclass Sample:\n    def __init__(self, metadata):\n"
        "        self.metadata, self.status = metadata, Thing()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from only_on_the_driver import Sample, Thing

    config = EpisodeConfig(max_turns=2, max_new_tokens=16)
    bad = EpisodeJob("sokoban", {**SOKOBAN, "thing": Thing()}, seed=0, config=config)
    good = [EpisodeJob("sokoban", SOKOBAN, seed=i, config=config) for i in (1, 2)]
    sampled = EpisodeJob("sokoban", sample=Sample({"env_config": SOKOBAN}), seed=3, config=config)

    async def play(*jobs):
        return await asyncio.wait_for(asyncio.gather(*(scripted.run(job) for job in jobs)), timeout=60)

    unreadable, *beside = asyncio.run(play(bad, *good, sampled))
    assert unreadable.status is Status.FAILED and unreadable.reward == 0.0
    assert "No module named 'only_on_the_driver'" in unreadable.error
    assert "install that module on every node" in unreadable.error and "PYTHONPATH" in unreadable.error
    assert [t.status for t in beside] == [Status.TRUNCATED] * 3, [t.error for t in beside]
    after = asyncio.run(play(*good))
    assert [t.status for t in after] == [Status.TRUNCATED] * 2 and scripted._slots.load == [0, 0]


def test_actors_the_cluster_cannot_hold_fail_their_episodes_at_once(ray_cluster, served):
    """Two one-CPU nodes, actors asking four CPUs each: one line naming the request and what the
    cluster has, instead of actors pending forever."""
    _, codec = served
    make_engine = functools.partial(ScriptedEngine, [[0]])
    with RayEpisodeWorkers(2, codec.processor, make_engine, num_cpus=4, resources={"tpu": 1}) as pool:

        async def play():
            return await asyncio.wait_for(pool.run(EpisodeJob("sokoban", SOKOBAN, seed=0)), timeout=30)

        traj = asyncio.run(play())
    assert traj.status is Status.FAILED and traj.reward == 0.0
    assert "Ray actors asking CPU=4, tpu=1 each: 2 wanted, the cluster has room for 0" in traj.error
    assert "have CPU=2, tpu=0 in all" in traj.error and "vlm_envs_ray_actor_cpus" in traj.error


def test_an_actor_not_started_in_time_fails_its_episodes_and_the_line_says_why(ray_cluster, served):
    """Room for the actor on paper (a one-CPU node), but other work holds half of each node's CPU:
    its episodes end FAILED after place_timeout_s with what it asked and what is free, instead of
    waiting forever."""
    _, codec = served

    @ray.remote(num_cpus=0.5)
    class Hog:
        def ping(self):
            return True

    nodes = sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])
    hogs = [
        Hog.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n, soft=False)).remote() for n in nodes
    ]
    try:
        ray.get([hog.ping.remote() for hog in hogs], timeout=60)
        make_engine = functools.partial(ScriptedEngine, [[0]])
        with RayEpisodeWorkers(1, codec.processor, make_engine, num_cpus=1, place_timeout_s=3) as pool:

            async def play():
                return await asyncio.wait_for(pool.run(EpisodeJob("sokoban", SOKOBAN, seed=0)), timeout=30)

            traj = asyncio.run(play())
    finally:
        for hog in hogs:
            ray.kill(hog)
    assert traj.status is Status.FAILED
    assert re.search(
        r"an actor asking CPU=1 was not started within 3 s \(free now: CPU=[\d.]+ of 2\)", traj.error
    )
