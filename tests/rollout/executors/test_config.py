"""One executor interface: the in-process one, config resolution, and no ray unless asked for."""

import asyncio
import functools
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rollout_helpers import assert_trainer_invariants

from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig
from vlm_envs.rollout.executors.config import ExecutorConfig
from vlm_envs.rollout.executors.in_process import InProcessEpisodes
from vlm_envs.rollout.executors.workers import EpisodeJob
from vlm_envs.rollout.trajectory import Status

SOKOBAN = {"grid_size": (6, 6), "num_boxes": 1, "render_mode": "vision"}


def test_importing_the_rollout_and_the_hook_does_not_import_ray():
    code = (
        "import sys, vlm_envs.rollout, vlm_envs.rollout.slime, vlm_envs.rollout.executors; "
        "assert 'ray' not in sys.modules, 'ray was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_in_process_executor_plays_jobs_and_fails_unknown_envs(served):
    server, codec = served
    config = EpisodeConfig(max_turns=2, max_new_tokens=24)

    async def main():
        async with SGLangEngine(server.url) as engine:
            with InProcessEpisodes(codec, lambda: engine) as episodes:
                return await asyncio.gather(
                    episodes.run(EpisodeJob("sokoban", SOKOBAN, seed=3, config=config)),
                    episodes.run(EpisodeJob("no-such-env", seed=0, config=config)),
                )

    good, bad = asyncio.run(main())
    assert good.status in (Status.COMPLETED, Status.TRUNCATED) and good.train_inputs()
    assert_trainer_invariants(good, codec)
    assert bad.status is Status.FAILED and "no-such-env" in bad.error and bad.reward == 0.0


def test_the_config_names_one_executor():
    assert ExecutorConfig.from_args(SimpleNamespace()).in_process
    ray = ExecutorConfig.from_args(
        SimpleNamespace(
            vlm_envs_ray_actors=32,
            vlm_envs_ray_actor_cpus=2,
            vlm_envs_ray_resources={"env_cpu": 1, "a": 0.5},
            vlm_envs_ray_address="auto",
            vlm_envs_max_in_flight=512,
        )
    )
    assert (ray.ray_actors, ray.ray_actor_cpus, ray.ray_address, ray.max_in_flight) == (
        32,
        2,
        "auto",
        512,
    )
    assert ExecutorConfig.from_args(SimpleNamespace(vlm_envs_ray_actors=2)).max_in_flight is None
    assert ray.ray_resources == (("a", 0.5), ("env_cpu", 1)) and not ray.in_process
    assert hash(ray) == hash(dataclass_copy(ray))


def dataclass_copy(config):
    return ExecutorConfig(**{k: getattr(config, k) for k in config.__dataclass_fields__})


@pytest.mark.parametrize(
    ("yaml", "named"),
    [
        ({"vlm_envs_workers": 2, "vlm_envs_ray_actors": 2}, "not both"),
        ({"vlm_envs_ray_actors": -1}, "vlm_envs_ray_actors"),
        ({"vlm_envs_ray_actors": "4"}, "vlm_envs_ray_actors"),
        ({"vlm_envs_ray_actors": 2, "vlm_envs_ray_actor_cpus": -1}, "vlm_envs_ray_actor_cpus"),
        ({"vlm_envs_ray_actors": 2, "vlm_envs_ray_resources": ["gpu"]}, "vlm_envs_ray_resources"),
        ({"vlm_envs_ray_actors": 2, "vlm_envs_ray_resources": {"x": "1"}}, "vlm_envs_ray_resources"),
        ({"vlm_envs_ray_actors": 2, "vlm_envs_max_in_flight": 0}, "vlm_envs_max_in_flight"),
        ({"vlm_envs_ray_actors": 2, "vlm_envs_max_in_flight": 2.5}, "vlm_envs_max_in_flight"),
        ({"vlm_envs_workers": 10_000_000}, "vlm_envs_workers must be at most 256"),
    ],
)
def test_a_bad_executor_config_fails_the_sample_and_names_the_key(served, yaml, named):
    from slime.utils.types import Sample

    from vlm_envs.rollout import slime as hook

    server, _ = served
    host, port = server.url.removeprefix("http://").split(":")
    args = SimpleNamespace(
        sglang_router_ip=host,
        sglang_router_port=int(port),
        rollout_max_response_len=16,
        rollout_interaction_env_path="sokoban",
        **yaml,
    )
    sample = Sample(index=0)
    asyncio.run(hook.generate(args, sample, {"max_new_tokens": 16}))
    assert sample.status is Sample.Status.FAILED and named in sample.metadata["vlm_envs"]["error"]


@pytest.mark.parametrize("processes", [0, 10_000_000, True, 2.0])
def test_a_pool_of_no_or_countless_workers_is_refused_before_any_starts(processes):
    from vlm_envs.rollout.executors.workers import EpisodeWorkers

    with pytest.raises(ValueError, match=r"^processes must be an int from 1 to 256, got "):
        EpisodeWorkers(processes, None, lambda: None)


def test_the_config_builds_the_local_pool(served):
    from vlm_envs.rollout.executors.workers import EpisodeWorkers

    server, codec = served
    config = ExecutorConfig(workers=1)
    with config.build(codec, functools.partial(SGLangEngine, server.url)) as pool:
        assert isinstance(pool, EpisodeWorkers) and pool.processes == 1
    from vlm_envs.rollout.executors.ray_workers import RAY_MAX_IN_FLIGHT

    unbounded_ray = ExecutorConfig(ray_actors=1).build(codec, functools.partial(SGLangEngine, server.url))
    assert unbounded_ray.max_in_flight == RAY_MAX_IN_FLIGHT  # the Ray pool's default bound


def test_the_config_builds_the_ray_pool_with_its_bound_on_episodes_in_flight(served):
    from vlm_envs.rollout.executors.ray_workers import RayEpisodeWorkers

    server, codec = served
    config = ExecutorConfig(ray_actors=3, ray_actor_cpus=0.5, max_in_flight=7)
    pool = config.build(codec, functools.partial(SGLangEngine, server.url))  # actors start on first run
    assert isinstance(pool, RayEpisodeWorkers) and (pool.actors, pool.max_in_flight) == (3, 7)
