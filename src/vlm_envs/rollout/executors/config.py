"""Where episodes play, picked by config: in process, in worker processes, or on Ray actors.

:class:`~vlm_envs.rollout.executors.in_process.InProcessEpisodes` plays on the caller's event loop
(env steps on the shared rollout threads); :class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`
in local worker processes; :class:`~vlm_envs.rollout.executors.ray_workers.RayEpisodeWorkers` on Ray
actors. :class:`ExecutorConfig` says which, resolved once from a trainer's config; callers never
branch on it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.executors.in_process import EpisodeExecutor, InProcessEpisodes
from vlm_envs.rollout.executors.worker_process import MAX_WORKER_PROCESSES


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
            from vlm_envs.rollout.executors.workers import EpisodeWorkers

            return EpisodeWorkers(
                self.workers, source, make_engine, max_in_flight=self.max_in_flight, **shared
            )
        from vlm_envs.rollout.executors.ray_workers import RAY_MAX_IN_FLIGHT, RayEpisodeWorkers  # imports ray

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
