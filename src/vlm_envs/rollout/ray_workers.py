"""Episodes on Ray actors: the rollout's CPU work spread over a cluster's cores.

:class:`RayEpisodeWorkers` has :class:`~vlm_envs.rollout.workers.EpisodeWorkers`' interface
(``run(job, should_abort)``, ``start``, ``close``, context manager) over a pool of async Ray actors.
Each actor builds its codec and engine client once, from a spec put in the object store once, and
plays whole episodes with the env steps inline on its own event loop. Episodes go to the least
loaded actor, at most ``max_in_flight`` per actor; callers beyond that wait for a free slot.

A finished trajectory comes back through the object store with its training tensors as numpy
arrays, which the caller reads zero-copy (``torch.from_numpy`` over the store's buffer). An actor
that dies fails its in-flight episodes with Ray's ``ActorDiedError`` (FAILED, the cause in the
error) and is replaced for the next ones. Importing this module imports ray; nothing else does.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import os
import threading
import warnings
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import ray
import torch
from ray.exceptions import RayActorError

from vlm_envs.rollout import contract
from vlm_envs.rollout.aborts import AbortWatch
from vlm_envs.rollout.engines import Engine
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.rollout.worker_process import EpisodeJob, WorkerSpec, play_job

__all__ = ["RayEpisodeWorkers"]

#: Calls an actor serves beside its episodes (aborts), so an abort never waits for a slot.
SPARE_CALLS = 16


@ray.remote
class EpisodeActor:
    """One Ray actor: a codec and an engine client, playing episodes on its event loop."""

    def __init__(self, spec: WorkerSpec) -> None:
        from vlm_envs.rollout.codec import ChatCodec

        self.args = spec.args
        self.aborted: set[int] = set()
        self.broken: str | None = None
        try:
            self.codec = ChatCodec(
                spec.processor, chat_template=spec.chat_template, cache_bytes=spec.cache_bytes
            )
            self.engine = spec.make_engine()
        except Exception as err:  # every episode fails with this, instead of an actor restarting in a loop
            self.broken = f"the actor could not start: {type(err).__name__}: {err}"
        # What this process holds now (torch, transformers, the processor) lives as long as it does:
        # full collections need not walk it with many episodes in flight (as in a worker process).
        gc.collect()
        gc.freeze()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def play(self, job_id: int, job: EpisodeJob) -> tuple[Trajectory, dict[str, Any]]:
        """The trajectory, its training tensors moved out as numpy arrays (zero-copy for the caller)."""
        if self.broken is not None:
            return Trajectory.failed(f"ray: {self.broken}", job.config.failure_reward), {}
        try:
            traj = await play_job(job_id, job, self.codec, self.engine, self.args, self.aborted)
        finally:
            self.aborted.discard(job_id)
        try:
            arrays = {k: _as_array(v) for k, v in traj.train_inputs().items()}
        except Exception as err:  # e.g. out of memory: the episode fails, the actor goes on
            error = f"ray: training tensors: {type(err).__name__}: {err}"
            return Trajectory.failed(error, job.config.failure_reward), {}
        traj._train_inputs = None
        return traj, arrays

    async def abort(self, job_id: int) -> None:
        self.aborted.add(job_id)


def _as_array(tensor: torch.Tensor) -> Any:
    try:
        return tensor.numpy()
    except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16): pickled as a tensor
        return tensor


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    with warnings.catch_warnings():  # the store's buffers are read-only; so are trajectory tensors
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(value)


class RayEpisodeWorkers:
    """Plays episodes on ``actors`` Ray actors; :meth:`run` is the async entry point.

    ``processor``, ``make_engine``, ``args``, ``chat_template`` and ``cache_bytes`` are as for
    :class:`~vlm_envs.rollout.workers.EpisodeWorkers` (``make_engine`` must be picklable). Each
    actor takes ``num_cpus`` (and ``resources``, Ray's custom resources) and they are spread over
    the cluster. The pool joins the cluster this process is connected to, else ``address``, else
    starts a local one (``ray.init``). Actors start on the first :meth:`run`, or at :meth:`start`.
    """

    def __init__(
        self,
        actors: int,
        processor: Any,
        make_engine: Callable[[], Engine],
        *,
        args: Any = None,
        chat_template: str | None = None,
        cache_bytes: int = 256 << 20,
        num_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        address: str | None = None,
        max_in_flight: int = 64,
    ) -> None:
        if actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        if num_cpus < 0:
            raise ValueError(f"num_cpus must be >= 0, got {num_cpus}")
        self.max_in_flight = max_in_flight
        self._spec = WorkerSpec(processor, make_engine, args, chat_template, cache_bytes)
        self._spec_ref: ray.ObjectRef | None = None
        self._address = address
        env_vars = {contract.LOG_ENV: os.environ[contract.LOG_ENV]} if contract.LOG_ENV in os.environ else {}
        self._options: dict[str, Any] = dict(
            num_cpus=num_cpus,
            resources=dict(resources or {}),
            scheduling_strategy="SPREAD",
            max_concurrency=max_in_flight + SPARE_CALLS,
            runtime_env={"env_vars": env_vars} if env_vars else None,
        )
        self._actors: list[Any] = [None] * actors
        self._load = [0] * actors
        self._lock = threading.Lock()
        self._free: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = deque()
        self._ids = itertools.count()
        self._closing = False
        self._aborts = AbortWatch(lambda actor, job_id: actor.abort.remote(job_id))

    @property
    def actors(self) -> int:
        return len(self._actors)

    def start(self) -> None:
        """Connect to the cluster and start every actor now (they build their codec and engine)."""
        with self._lock:
            for index in range(len(self._actors)):
                self._actor(index)

    def node_ids(self) -> list[str]:
        """The Ray node id of every actor (starting them if needed)."""
        self.start()
        return ray.get([actor.node_id.remote() for actor in self._actors])

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory:
        """Play ``job`` on an actor; never raises for env, engine, codec or actor failures."""
        job_id = next(self._ids)
        try:
            index, actor = await self._acquire()
        except Exception as err:  # no cluster to join, or an actor that cannot be created
            return Trajectory.failed(f"ray: {type(err).__name__}: {err}", job.config.failure_reward)
        try:
            ref = actor.play.remote(job_id, job)
            self._aborts.watch(job_id, actor, should_abort)
            traj, arrays = await ref
        except RayActorError as err:
            self._replace(index, actor)
            cause = "the pool was closed" if self._closing else _one_line(err)
            return Trajectory.failed(f"ray: {type(err).__name__}: {cause}", job.config.failure_reward)
        except Exception as err:  # e.g. a job or trajectory Ray cannot serialize: this episode only
            return Trajectory.failed(
                f"ray: {type(err).__name__}: {_one_line(err)}", job.config.failure_reward
            )
        finally:
            self._aborts.forget(job_id)
            self._release(index)
        if arrays:
            traj._train_inputs = {key: _as_tensor(value) for key, value in arrays.items()}
        return traj

    def close(self) -> None:
        """Kill the actors; running episodes end FAILED. A later :meth:`run` starts new ones."""
        with self._lock:
            actors, self._actors = self._actors, [None] * len(self._actors)
            self._closing = True
        for actor in actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)

    def __enter__(self) -> RayEpisodeWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals --------------------------------------------------------------------------------

    def _actor(self, index: int) -> Any:
        """The actor in slot ``index``, created (and the cluster joined) if there is none."""
        if self._actors[index] is None:
            if self._spec_ref is None:
                if not ray.is_initialized():
                    ray.init(address=self._address)
                self._spec_ref = ray.put(self._spec)  # the processor goes to the store once
            self._closing = False
            options = {k: v for k, v in self._options.items() if v is not None}
            self._actors[index] = EpisodeActor.options(**options).remote(self._spec_ref)
        return self._actors[index]

    async def _acquire(self) -> tuple[int, Any]:
        """The least loaded actor with a free slot; waits for one when every actor is full."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                index = min(range(len(self._load)), key=self._load.__getitem__)
                if self._load[index] < self.max_in_flight:
                    actor = self._actor(index)
                    self._load[index] += 1
                    return index, actor
                waiter = loop.create_future()
                self._free.append((loop, waiter))
            await waiter

    def _release(self, index: int) -> None:
        with self._lock:
            self._load[index] -= 1
            while self._free:
                loop, waiter = self._free.popleft()
                if waiter.done():  # its caller was cancelled
                    continue
                with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
                    loop.call_soon_threadsafe(_wake, waiter)
                    return

    def _replace(self, index: int, dead: Any) -> None:
        """Put a new actor in place of ``dead`` (once, however many of its episodes report it)."""
        with self._lock:
            if self._actors[index] is dead:
                with contextlib.suppress(Exception):
                    ray.kill(dead)
                self._actors[index] = None
                if not self._closing:
                    self._actor(index)


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())
