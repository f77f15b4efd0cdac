"""Where episodes play: one interface, three executors, picked by config.

An :class:`EpisodeExecutor` plays an :class:`EpisodeJob` and returns its :class:`Trajectory`
(``await run(job, should_abort)``; never raises for env, engine or codec failures), with ``start``,
``close`` and a context manager. :class:`InProcessEpisodes` plays on the caller's event loop (env
steps on the shared rollout threads); :class:`~vlm_envs.rollout.workers.EpisodeWorkers` in local
worker processes; :class:`~vlm_envs.rollout.ray_workers.RayEpisodeWorkers` on Ray actors.
:class:`ExecutorConfig` says which, resolved once from a trainer's config; callers never branch on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from vlm_envs.registry import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines import Engine
from vlm_envs.rollout.episode import run_episode
from vlm_envs.rollout.offload import rollout_executor
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.rollout.worker_process import MAX_WORKER_PROCESSES, EpisodeJob

__all__ = ["EpisodeExecutor", "ExecutorConfig", "InProcessEpisodes"]


class EpisodeExecutor(Protocol):
    """Plays episodes somewhere; what the slime hook, eval and benchmarks talk to."""

    def start(self) -> None: ...

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory: ...

    def close(self) -> None: ...

    def __enter__(self) -> EpisodeExecutor: ...

    def __exit__(self, *exc: object) -> None: ...


class InProcessEpisodes:
    """Plays episodes on the caller's event loop with ``codec`` and the engine ``make_engine`` returns.

    The engine is the caller's (an HTTP engine's session belongs to an event loop, so its owner
    closes it there); ``make_engine`` is called once, at the first :meth:`run`.
    """

    def __init__(self, codec: ChatCodec, make_engine: Callable[[], Engine], *, args: Any = None) -> None:
        self.codec = codec
        self.args = args
        self._make_engine = make_engine
        self._engine: Engine | None = None

    def start(self) -> None:
        if self._engine is None:
            self._engine = self._make_engine()

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory:
        """Play ``job`` here; never raises for env, engine or codec failures."""
        try:
            self.start()
            env = build_env(job.env, sample=job.sample, args=self.args, **job.env_config)
        except Exception as err:  # an unknown env, a bad config or no engine fails this episode only
            return Trajectory.failed(f"env: {type(err).__name__}: {err}", job.config.failure_reward)
        try:
            traj = await run_episode(
                env,
                self._engine,
                self.codec,
                seed=job.seed,
                config=job.config,
                sampling_params=job.sampling_params,
                should_abort=should_abort,
                fallback_prompt=job.fallback_prompt,
            )
        finally:
            with contextlib.suppress(Exception):  # an env that fails to close must not lose the episode
                env.close()
        try:  # the training tensors and texts, made off the caller's loop
            await asyncio.get_running_loop().run_in_executor(rollout_executor(), traj.prepare, self.codec)
        except Exception as err:  # e.g. out of memory: the episode fails, the caller goes on
            return Trajectory.failed(f"training data: {type(err).__name__}: {err}", job.config.failure_reward)
        return traj

    def close(self) -> None:
        self._engine = None

    def __enter__(self) -> InProcessEpisodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class ExecutorConfig:
    """Which executor plays episodes: ``workers`` local processes, ``ray_actors`` Ray actors, or
    neither (in process). Hashable, so callers can keep one executor per config."""

    workers: int = 0
    ray_actors: int = 0
    ray_actor_cpus: float = 1.0
    #: Ray custom resources each actor takes, as sorted ``(name, amount)`` pairs.
    ray_resources: tuple[tuple[str, float], ...] = ()
    #: The Ray cluster to join when this process is not connected to one (``None``: ``ray.init()``).
    ray_address: str | None = None
    #: Episodes in flight per worker or actor at most (more wait in the caller for a free slot);
    #: ``None``: unbounded in worker processes, the Ray pool's default on Ray actors.
    max_in_flight: int | None = None

    def __post_init__(self) -> None:
        for name in ("workers", "ray_actors"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ValueError(f"vlm_envs_{name} must be an integer >= 0, got {value!r}")
        if self.workers > MAX_WORKER_PROCESSES:
            raise ValueError(f"vlm_envs_workers must be at most {MAX_WORKER_PROCESSES}, got {self.workers}")
        bound = self.max_in_flight
        if bound is not None and (type(bound) is not int or bound < 1):
            raise ValueError(f"vlm_envs_max_in_flight must be an integer >= 1, got {bound!r}")
        if self.workers and self.ray_actors:
            raise ValueError("set vlm_envs_workers or vlm_envs_ray_actors, not both")
        cpus = self.ray_actor_cpus
        if isinstance(cpus, bool) or not isinstance(cpus, int | float) or not 0 <= cpus < math.inf:
            raise ValueError(f"vlm_envs_ray_actor_cpus must be a number >= 0, got {cpus!r}")
        for name, amount in self.ray_resources:
            if not isinstance(name, str) or isinstance(amount, bool) or not isinstance(amount, int | float):
                raise ValueError(
                    f"vlm_envs_ray_resources must map names to amounts, got {name!r}: {amount!r}"
                )
        if self.ray_address is not None and not isinstance(self.ray_address, str):
            raise ValueError(f"vlm_envs_ray_address must be a string, got {self.ray_address!r}")

    @classmethod
    def from_args(cls, args: Any) -> ExecutorConfig:
        """From a trainer's config: ``vlm_envs_workers``, ``vlm_envs_ray_actors``,
        ``vlm_envs_ray_actor_cpus``, ``vlm_envs_ray_resources``, ``vlm_envs_ray_address``,
        ``vlm_envs_max_in_flight``."""
        resources = getattr(args, "vlm_envs_ray_resources", None) or {}
        if not isinstance(resources, Mapping):
            raise ValueError(f"vlm_envs_ray_resources must be a mapping, got {resources!r}")
        cpus = getattr(args, "vlm_envs_ray_actor_cpus", None)
        return cls(
            workers=getattr(args, "vlm_envs_workers", None) or 0,
            ray_actors=getattr(args, "vlm_envs_ray_actors", None) or 0,
            ray_actor_cpus=1.0 if cpus is None else cpus,
            ray_resources=tuple(sorted(resources.items())),
            ray_address=getattr(args, "vlm_envs_ray_address", None) or None,
            max_in_flight=getattr(args, "vlm_envs_max_in_flight", None),
        )

    @property
    def in_process(self) -> bool:
        return not (self.workers or self.ray_actors)

    def build(
        self, codec: ChatCodec, make_engine: Callable[[], Engine], *, args: Any = None
    ) -> EpisodeExecutor:
        """The executor this config names. Out of process, ``make_engine`` must be picklable; in
        process, the engine it returns stays the caller's to close."""
        if self.in_process:
            return InProcessEpisodes(codec, make_engine, args=args)
        source = codec.processor if codec.processor is not None else codec.tokenizer
        shared: dict[str, Any] = {"args": args, "chat_template": codec.chat_template}
        if self.workers:
            from vlm_envs.rollout.workers import EpisodeWorkers

            return EpisodeWorkers(
                self.workers, source, make_engine, max_in_flight=self.max_in_flight, **shared
            )
        from vlm_envs.rollout.ray_workers import RAY_MAX_IN_FLIGHT, RayEpisodeWorkers  # imports ray

        return RayEpisodeWorkers(
            self.ray_actors,
            source,
            make_engine,
            num_cpus=self.ray_actor_cpus,
            resources=dict(self.ray_resources),
            address=self.ray_address,
            max_in_flight=self.max_in_flight or RAY_MAX_IN_FLIGHT,
            **shared,
        )
