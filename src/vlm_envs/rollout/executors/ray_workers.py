"""Episodes on Ray actors: the rollout's CPU work spread over a cluster's cores.

:class:`RayEpisodeWorkers` has :class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`' interface
over a pool of async Ray actors (:class:`~vlm_envs.rollout.executors.ray_actor.EpisodeActor`), each of
which builds its codec and engine client once and plays whole episodes, training tensors included.
Episodes go to the least loaded actor, at most ``max_in_flight`` per actor; callers beyond that wait.

A Ray call costs the caller about 0.3 ms of CPU, 1 ms with its reply in the object store: more than an
episode's share. So calls carry batches: a dispatcher thread sends the jobs queued meanwhile to an actor
in one ``submit``, and a collector thread keeps one ``collect`` outstanding per actor, which returns the
episodes finished by then (at most 32 MB of tensors). A job travels as a pickle of its own
(:meth:`EpisodeJob.portable`): one an actor cannot read (its module missing on the node) fails alone,
saying what to install. A trajectory travels as its pickle with its large buffers in the object store,
read without a copy; a store too small for the episodes in flight is said once in a while
(:mod:`~vlm_envs.rollout.executors.ray_store`). An actor that dies, or is not placed within
``place_timeout_s``, fails its in-flight episodes and is replaced.

The pool joins its cluster off the caller's event loop in bounded time
(:func:`~vlm_envs.rollout.executors.ray_cluster.join`) and checks that the cluster can hold its actors
(:func:`~vlm_envs.rollout.executors.ray_cluster.unmet`): where it cannot, every episode ends FAILED with
that one line instead of waiting. Importing this module imports ray; nothing else does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import os
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

import ray
from ray import cloudpickle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vlm_envs.errors import one_line
from vlm_envs.rollout import contract
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.executors.aborts import AbortWatch
from vlm_envs.rollout.executors.handoff import Waiter
from vlm_envs.rollout.executors.ray_actor import EpisodeActor, read_finished
from vlm_envs.rollout.executors.ray_cluster import (
    JOIN_TIMEOUT_S,
    ClusterError,
    Placements,
    join,
    unmet,
)
from vlm_envs.rollout.executors.ray_store import StoreWatch
from vlm_envs.rollout.executors.slots import Slots
from vlm_envs.rollout.executors.worker_process import EpisodeJob, WorkerSpec
from vlm_envs.rollout.trajectory import Trajectory

__all__ = ["RayEpisodeWorkers"]

#: Calls an actor serves beside its episodes (``submit``, ``collect``, aborts), so none waits for a slot.
SPARE_CALLS = 16
#: How often the collector thread looks for new actors and for the pool's end (seconds).
POLL_S = 0.1
#: Episodes in flight per actor unless told otherwise: enough to keep a core busy with a 50 ms
#: engine at about 1 ms of CPU per turn (raise it for turns that take seconds to generate).
RAY_MAX_IN_FLIGHT = 64
#: Seconds an actor may take to be placed and started (imports, codec, engine) before its episodes
#: fail and it is replaced: other work may hold the resources it asks for.
PLACE_TIMEOUT_S = 180.0


class _Threads:
    """The dispatcher and collector threads of one run of the pool (until :meth:`close`)."""

    def __init__(self, pool: RayEpisodeWorkers) -> None:
        self.outbox: queue.SimpleQueue[tuple[int, Any, int, EpisodeJob] | None] = queue.SimpleQueue()
        #: ``submit`` calls sent, with their slot and job ids, for the collector to read their
        #: replies: the jobs the actor could not read
        self.submitted: queue.SimpleQueue[tuple[Any, int, list[int]]] = queue.SimpleQueue()
        self.closed = threading.Event()
        self.threads = [
            threading.Thread(target=pool._dispatch, args=(self,), daemon=True, name="vlm-envs-ray-dispatch"),
            threading.Thread(target=pool._collect, args=(self,), daemon=True, name="vlm-envs-ray-collect"),
        ]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.closed.set()
        self.outbox.put(None)
        for thread in self.threads:
            thread.join(timeout=10)


class RayEpisodeWorkers:
    """Plays episodes on ``actors`` Ray actors; :meth:`run` is the async entry point.

    ``processor``, ``make_engine``, ``args``, ``chat_template`` and ``cache_bytes`` are as for
    :class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers` (``make_engine`` must be picklable). Each
    actor takes ``num_cpus`` (and ``resources``, Ray's custom resources) and they are spread over
    the cluster. The pool joins the cluster this process is connected to, else ``address``, else
    ``RAY_ADDRESS``, else starts a local one, within ``join_timeout_s``. Actors start on the first
    :meth:`run`, or at :meth:`start`; one not started within ``place_timeout_s`` fails its episodes.
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
        max_in_flight: int = RAY_MAX_IN_FLIGHT,
        join_timeout_s: float = JOIN_TIMEOUT_S,
        place_timeout_s: float = PLACE_TIMEOUT_S,
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
        self._nodes: list[str] = []  # the cluster's live nodes when the pool joined it
        self._address = address
        self._join_timeout_s = join_timeout_s
        self._request = {"CPU": num_cpus, **(resources or {})}  # what one actor takes
        self._joining: concurrent.futures.Future[None] | None = None
        self._placements = Placements(self._request, place_timeout_s)
        env_vars = {contract.LOG_ENV: os.environ[contract.LOG_ENV]} if contract.LOG_ENV in os.environ else {}
        self._options: dict[str, Any] = dict(
            num_cpus=num_cpus,
            resources=dict(resources or {}),
            max_concurrency=max_in_flight + SPARE_CALLS,
            runtime_env={"env_vars": env_vars} if env_vars else None,
        )
        # per-actor state is made once the cluster is known to hold ``actors`` (see _join): a number
        # no cluster places is refused before anything is allocated for it
        self._size = actors
        self._actors: list[Any] = []
        self._pending: list[dict[int, Waiter]] = []
        self._lock = threading.Lock()
        self._slots: Slots | None = None
        self._store, self._running = StoreWatch(), 0  # the object store against the episodes in flight
        self._ids = itertools.count()
        self._threads: _Threads | None = None
        self._aborts = AbortWatch(lambda actor, job_id: actor.abort.remote(job_id))

    @property
    def actors(self) -> int:
        return self._size

    def start(self) -> None:
        """Connect to the cluster and start every actor now (they build their codec and engine);
        raises :class:`~vlm_envs.rollout.executors.ray_cluster.ClusterError` if the cluster cannot be joined
        or cannot hold the actors."""
        self._joining_now().result()
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
        waiter = Waiter(job.config.failure_reward)
        try:
            if self._spec_ref is None:  # not joined yet: on a thread, never on this loop
                await asyncio.wrap_future(self._joining_now())
        except ClusterError as err:  # no cluster to join, or one that cannot hold the actors
            return Trajectory.failed(f"ray: {err}", job.config.failure_reward)
        with self._lock:  # a rollout batch is about the most episodes under way at once
            self._running += 1
            self._store.in_flight(self._running)
        try:
            return await self._play(job_id, job, waiter, should_abort)
        finally:
            with self._lock:
                self._running -= 1

    async def _play(
        self, job_id: int, job: EpisodeJob, waiter: Waiter, should_abort: Callable[[], bool] | None
    ) -> Trajectory:
        assert self._slots is not None  # made by the join
        index = await self._slots.take()
        try:
            try:
                actor, threads = self._register(index, job_id, waiter)
            except Exception as err:  # an actor that cannot be created
                return Trajectory.failed(f"ray: {one_line(err, 500, typed=True)}", job.config.failure_reward)
            threads.outbox.put((index, actor, job_id, job))
            self._aborts.watch(job_id, actor, should_abort)
            return await waiter.trajectory()
        finally:
            self._aborts.forget(job_id)
            with self._lock:
                self._pending[index].pop(job_id, None)
            self._slots.give_back(index)

    def close(self) -> None:
        """Kill the actors; running episodes end FAILED. A later :meth:`run` starts new ones."""
        with self._lock:
            actors, self._actors = self._actors, [None] * len(self._actors)
            pending, self._pending = self._pending, [{} for _ in self._actors]
            threads, self._threads = self._threads, None
            self._placements.clear()
        if threads is not None:
            threads.closed.set()
        for actor in actors:
            if actor is not None:
                with contextlib.suppress(Exception):
                    ray.kill(actor)
        for entries in pending:
            for waiter in entries.values():
                waiter.fail("ray: the pool was closed")
        if threads is not None:
            threads.stop()

    def __enter__(self) -> RayEpisodeWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals --------------------------------------------------------------------------------

    def _joining_now(self) -> concurrent.futures.Future[None]:
        """The pool's joining of the cluster (:meth:`_join` on a thread of its own), done, under
        way, or started now if there was none or the last one failed."""
        with self._lock:
            joining = self._joining
            if joining is None or (joining.done() and joining.exception() is not None):
                joining = self._joining = concurrent.futures.Future()
                threading.Thread(
                    target=self._join, args=(joining,), daemon=True, name="vlm-envs-ray-join"
                ).start()
            return joining

    def _join(self, joined: concurrent.futures.Future[None]) -> None:
        """Join the cluster, check that it can hold the actors and put the spec in its store."""
        try:
            join(self._address, self._join_timeout_s)
            problem = unmet(self._size, self._request)
            if problem is not None:
                raise ClusterError(
                    f"{problem}; ask for fewer vlm_envs_ray_actors or less vlm_envs_ray_actor_cpus / "
                    "vlm_envs_ray_resources, or add nodes that have them"
                )
            spec_ref = ray.put(self._spec)  # the processor goes to the store once
            self._store.baseline()
            nodes = sorted(node["NodeID"] for node in ray.nodes() if node["Alive"])
        except ClusterError as err:
            joined.set_exception(err)
        except Exception as err:  # the cluster went away meanwhile
            joined.set_exception(ClusterError(f"the Ray cluster: {one_line(err, 500, typed=True)}"))
        else:
            with self._lock:
                self._spec_ref, self._nodes = spec_ref, nodes
                if self._slots is None:
                    self._actors = [None] * self._size
                    self._pending = [{} for _ in range(self._size)]
                    self._slots = Slots(self._size, self.max_in_flight)
            joined.set_result(None)

    def _actor(self, index: int) -> Any:
        """The actor in slot ``index``, created if there is none (the cluster is joined)."""
        if self._actors[index] is None:
            if self._threads is None:
                self._threads = _Threads(self)
            options = {k: v for k, v in self._options.items() if v is not None}
            # slot i prefers node i mod n: spread for sure where Ray's SPREAD is best effort (it put
            # two actors on one node of two now and then); soft, so a node without room or gone
            # leaves the actor to Ray's choice
            node = self._nodes[index % len(self._nodes)] if self._nodes else None
            strategy = NodeAffinitySchedulingStrategy(node, soft=True) if node else "SPREAD"
            actor = EpisodeActor.options(scheduling_strategy=strategy, **options).remote(self._spec_ref)
            self._actors[index] = actor
            self._placements.watch(index, actor, actor.node_id.remote())
        return self._actors[index]

    def _register(self, index: int, job_id: int, waiter: Waiter) -> tuple[Any, _Threads]:
        """The actor in slot ``index`` with ``waiter`` registered on it, and the threads that serve it."""
        with self._lock:
            actor = self._actor(index)
            self._pending[index][job_id] = waiter
            assert self._threads is not None  # started with the actor
            return actor, self._threads

    def _dispatch(self, threads: _Threads) -> None:
        """Send the queued jobs: one ``submit`` call per actor for all of its jobs queued so far."""
        stop = False
        while not stop:
            items = [threads.outbox.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    items.append(threads.outbox.get_nowait())
            stop = None in items
            batches: dict[int, tuple[int, Any, list[tuple[int, bytes]]]] = {}
            for item in items:
                if item is None:
                    continue
                index, actor, job_id, job = item
                try:  # each job a pickle of its own: one that cannot be pickled or read fails alone
                    data = cloudpickle.dumps(job.portable())
                except Exception as err:
                    self._fail(
                        index, job_id, f"ray: the job cannot be sent: {one_line(err, 500, typed=True)}"
                    )
                    continue
                batches.setdefault(id(actor), (index, actor, []))[2].append((job_id, data))
            for index, actor, jobs in batches.values():
                job_ids = [job_id for job_id, _ in jobs]
                try:
                    threads.submitted.put((actor.submit.remote(jobs), index, job_ids))
                except Exception as err:  # e.g. the pool was closed meanwhile
                    for job_id in job_ids:
                        self._fail(index, job_id, f"ray: {one_line(err, 500, typed=True)}")

    def _collect(self, threads: _Threads) -> None:
        """Keep one ``collect`` call outstanding per actor and hand back what they return."""
        calls: dict[Any, tuple[int, Any]] = {}  # ObjectRef -> (slot, actor)
        submits: dict[Any, tuple[int, list[int]]] = {}  # ObjectRef -> (slot, job ids)
        while not threads.closed.is_set():
            with self._lock:
                busy = {id(actor) for _, actor in calls.values()}
                for index, actor in enumerate(self._actors):
                    if actor is not None and id(actor) not in busy:
                        calls[actor.collect.remote()] = (index, actor)
            with contextlib.suppress(queue.Empty):
                while True:
                    ref, index, job_ids = threads.submitted.get_nowait()
                    submits[ref] = (index, job_ids)
            if not calls:
                threads.closed.wait(POLL_S)
                continue
            starting = self._placements.refs()
            waiting = [*calls, *submits, *starting]
            ready, _ = ray.wait(waiting, num_returns=1, timeout=POLL_S)
            if ready:  # and every other one ready by now
                ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
            for index, actor, error in self._placements.overdue(ready):
                self._replace(index, actor, f"ray: {error}")
            for ref in ready:
                if ref in starting:
                    continue
                if ref in submits:
                    self._unread(ref, *submits.pop(ref))
                    continue
                index, actor = calls.pop(ref)
                try:
                    finished = ray.get(ref)
                except Exception as err:  # the actor died (RayActorError), or its batch cannot be read
                    self._replace(index, actor, f"ray: {one_line(err, 500, typed=True)}")
                    continue
                self._store.received([sum(b.nbytes for b in buffers) for _, _, buffers in finished])
                for job_id, body, buffers in finished:
                    self._settle(index, job_id, lambda r, b=body, bufs=buffers: read_finished(b, bufs, r))
                del finished

    def _unread(self, ref: Any, index: int, job_ids: list[int]) -> None:
        """Fail the jobs of a ``submit`` call that the actor could not read (all of them if the call
        failed: the actor died before reading them)."""
        try:
            unread = ray.get(ref)
        except Exception as err:
            unread = [(job_id, one_line(err, 500, typed=True)) for job_id in job_ids]
        for job_id, error in unread:
            self._fail(index, job_id, f"ray: {error}")

    def _fail(self, index: int, job_id: int, error: str) -> None:
        self._settle(index, job_id, lambda reward: Trajectory.failed(error, reward))

    def _settle(self, index: int, job_id: int, make: Callable[[float], Trajectory]) -> None:
        """Hand the caller waiting for ``job_id`` the trajectory ``make(its failure reward)``."""
        with self._lock:
            waiter = self._pending[index].get(job_id)
        if waiter is not None:
            waiter.hand_over([make(waiter.failure_reward)])

    def _replace(self, index: int, dead: Any, error: str) -> None:
        """Fail the episodes of ``dead`` and put a new actor in its place."""
        with self._lock:
            if self._actors[index] is not dead:
                return
            with contextlib.suppress(Exception):
                ray.kill(dead)
            self._actors[index] = None
            entries, self._pending[index] = self._pending[index], {}
            if self._threads is not None:  # not closed
                self._actor(index)
        for waiter in entries.values():
            waiter.fail(error)
