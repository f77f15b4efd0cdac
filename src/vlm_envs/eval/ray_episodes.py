"""Eval episodes on Ray actors (``vlm-envs eval --ray``). Importing this module imports ray.

Each :class:`EvalActor` builds the run's policy once from ``config.policy`` and
``config.options``, starts it (loading its processor and checking its servers from its own node)
and plays whole episodes, handing back a :class:`~vlm_envs.eval.episodes.FinishedEpisode` with the
frames as PNG bytes: only the driver writes to ``--out``. Episodes go to the actor with the fewest
in flight. An actor that dies ends its in-flight episodes FAILED with the cause and is replaced.
Actors are not detached: they die with the driver, however it ends. The run joins its cluster in
bounded time, off its event loop, and refuses actors the cluster cannot hold at all
(:mod:`vlm_envs.rollout.executors.ray_cluster`), each in one line.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError

from vlm_envs.errors import one_line
from vlm_envs.eval.config import EvalConfig
from vlm_envs.eval.episodes import FinishedEpisode, failed_result, finish, play_episode
from vlm_envs.eval.policies import PolicyError
from vlm_envs.eval.policy_kinds import build_policy
from vlm_envs.rollout.executors.ray_cluster import ClusterError, join, unmet
from vlm_envs.rollout.executors.slots import Slots

#: Seconds the actors have to start (placement, imports, policy start) before the run gives up.
ACTORS_READY_TIMEOUT_S = 300.0


@ray.remote
class EvalActor:
    """One Ray actor: the run's policy, playing episodes on its event loop."""

    def __init__(self, config: EvalConfig) -> None:
        self.config = config
        self.policy = build_policy(config.policy, config.options)
        self.started: asyncio.Task | None = None

    async def ready(self) -> None:
        """Start the policy (once); raises its :class:`PolicyError`."""
        if self.started is None:
            self.started = asyncio.ensure_future(self.policy.start())
        await asyncio.shield(self.started)

    async def play(self, index: int) -> FinishedEpisode:
        await self.ready()
        result = await play_episode(self.config, self.policy, index)
        return await asyncio.to_thread(finish, result, index, self.policy.name)


class RayEpisodes:
    """Plays a run's episodes on ``config.ray.actors`` Ray actors (see the module's docstring)."""

    def __init__(self, config: EvalConfig, policy_name: str) -> None:
        assert config.ray is not None
        self.config, self.placement, self.policy_name = config, config.ray, policy_name
        self._actors: list[Any] = []
        self._slots = Slots(0)
        self._initialized_here = False

    async def start(self) -> None:
        """Join or start the cluster, start every actor and wait until each has started its policy."""
        try:
            self._initialized_here = await asyncio.to_thread(
                join, self.placement.address, log_to_driver=False
            )
        except ClusterError as err:
            raise PolicyError(f"--ray: {err}") from None
        count = self.placement.actors or self._cluster_share()
        problem = unmet(count, {"CPU": self.placement.actor_cpus})
        if problem is not None:
            raise PolicyError(f"--ray: {problem}; ask for fewer --actors or less --actor-cpus")
        self._actors, self._slots = [None] * count, Slots(count)
        for index in range(count):
            self._new_actor(index)
        ready = [actor.ready.remote() for actor in self._actors]
        try:
            await asyncio.wait_for(asyncio.gather(*ready), ACTORS_READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise PolicyError(
                f"{len(ready)} Ray actors of {self.placement.actor_cpus:g} CPU did not start within "
                f"{ACTORS_READY_TIMEOUT_S:g} s (cluster resources: {ray.cluster_resources()}); "
                "ask for fewer --actors or --actor-cpus"
            ) from None
        except RayTaskError as err:
            cause = err.cause if isinstance(err.cause, PolicyError) else err
            raise PolicyError(f"on a Ray actor: {one_line(cause, 500)}") from None
        except RayActorError as err:
            raise PolicyError(f"a Ray actor could not start: {one_line(err, 500)}") from None

    async def play(self, index: int) -> FinishedEpisode:
        slot = await self._slots.take()
        actor = self._actors[slot]
        try:
            return await actor.play.remote(index)
        except RayActorError as err:  # the actor died (killed, out of memory, its node lost)
            self._replace(slot, actor)
            error = f"ray: {type(err).__name__}: {one_line(err, 500)}"
        except Exception as err:  # e.g. a result Ray cannot serialize: this episode only
            error = f"ray: {type(err).__name__}: {one_line(err, 500)}"
        finally:
            self._slots.give_back(slot)
        result = failed_result(self.config, index, error)
        return await asyncio.to_thread(finish, result, index, self.policy_name)

    async def close(self) -> None:
        """Kill the actors (and leave a cluster this run started)."""
        for actor in self._actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        self._actors = [None] * len(self._actors)
        if self._initialized_here:
            ray.shutdown()

    def _cluster_share(self) -> int:
        """As many actors as the cluster's CPUs hold (at least one)."""
        cpus = ray.cluster_resources().get("CPU", 1.0)
        per_actor = self.placement.actor_cpus or 1.0
        return max(1, int(cpus // per_actor))

    def _new_actor(self, index: int) -> None:
        self._actors[index] = EvalActor.options(
            num_cpus=self.placement.actor_cpus,
            scheduling_strategy="SPREAD",
            max_concurrency=self.config.concurrency + 1,
        ).remote(self.config)

    def _replace(self, index: int, dead: Any) -> None:
        """A new actor in place of ``dead`` (once, however many of its episodes report it)."""
        if self._actors[index] is dead:
            with contextlib.suppress(Exception):
                ray.kill(dead)
            self._new_actor(index)
