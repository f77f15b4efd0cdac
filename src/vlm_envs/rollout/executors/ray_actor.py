"""The Ray actor that plays episodes for :class:`~vlm_envs.rollout.executors.ray_workers.RayEpisodeWorkers`.

An :class:`EpisodeActor` holds a codec and an engine client and plays whole episodes on its event
loop, training tensors included. Jobs come in batches (``submit``); finished episodes go back in
batches too: ``collect`` returns the episodes finished by then, lingering :data:`LINGER_S` for more
once one is ready, cut at :data:`BATCH_BYTES` of large buffers (the rest wait for the next call: a
caller slow to call again never gets one huge reply), each as its pickle with its large buffers out of
band, which Ray puts in the object store. Importing this module imports ray.
"""

from __future__ import annotations

import asyncio
import contextlib
import pickle
import warnings

import numpy as np
import ray

from vlm_envs.rollout.executors import wire
from vlm_envs.rollout.executors.worker_process import (
    EpisodeJob,
    WorkerSpec,
    play_job,
    settle_collector,
    unreadable_job,
)
from vlm_envs.rollout.trajectory import Trajectory

#: Once an episode is ready, how long ``collect`` waits for more to come back with it (seconds).
LINGER_S = 0.02
#: ``collect`` returns once its episodes' large buffers reach this many bytes, and never returns more
#: (but always one episode, however large).
BATCH_BYTES = 32 << 20

#: A finished episode on its way back: job id, pickle, out-of-band buffers.
Finished = tuple[int, bytes, list[np.ndarray]]
#: What to do about a job an actor cannot read.
RAY_REMEDY = (
    "install that module on every node of the Ray cluster, or put its folder on the PYTHONPATH that "
    "each node's `ray start` runs with (or ship it: ray.init(runtime_env={'py_modules': [...]}))"
)


@ray.remote
class EpisodeActor:
    """One Ray actor: a codec and an engine client, playing episodes on its event loop."""

    def __init__(self, spec: WorkerSpec) -> None:
        from vlm_envs.rollout.codec import ChatCodec

        self.args = spec.args
        self.aborted: set[int] = set()
        self.broken: str | None = None
        self.finished: list[Finished] = []
        self.finished_bytes = 0
        self.tasks: set[asyncio.Task] = set()
        self.wake: asyncio.Event | None = None
        try:
            self.codec = ChatCodec(
                spec.processor, chat_template=spec.chat_template, cache_bytes=spec.cache_bytes
            )
            self.engine = spec.make_engine()
        except Exception as err:  # every episode fails with this, instead of an actor restarting in a loop
            self.broken = f"the actor could not start: {type(err).__name__}: {err}"
        settle_collector()

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    async def submit(self, jobs: list[tuple[int, bytes]]) -> list[tuple[int, str]]:
        """Start playing ``jobs`` (each pickled apart); they come back through :meth:`collect`.
        Returns the ids of the jobs that could not be read here, each with why."""
        unread = []
        for job_id, data in jobs:
            try:
                job: EpisodeJob = pickle.loads(data)
            except Exception as err:  # e.g. a class whose module this node lacks: that job fails alone
                unread.append((job_id, unreadable_job(err, RAY_REMEDY)))
                continue
            task = asyncio.get_running_loop().create_task(self._play(job_id, job))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return unread

    async def collect(self) -> list[Finished]:
        """The episodes finished since the last call; waits for one, then :data:`LINGER_S` for more."""
        wake = self._wake()
        await wake.wait()
        with contextlib.suppress(asyncio.TimeoutError):  # TimeoutError's alias from 3.11
            await asyncio.wait_for(self._full(), LINGER_S)
        batch, self.finished = cut_batch(self.finished, BATCH_BYTES)
        self.finished_bytes = sum(_size(f) for f in self.finished)
        if not self.finished:
            wake.clear()
        return batch

    async def abort(self, job_id: int) -> None:
        self.aborted.add(job_id)

    async def _play(self, job_id: int, job: EpisodeJob) -> None:
        if self.broken is not None:
            traj = Trajectory.failed(f"ray: {self.broken}", job.config.failure_reward)
        else:
            try:
                traj = await play_job(job_id, job, self.codec, self.engine, self.args, self.aborted)
            finally:
                self.aborted.discard(job_id)
            try:  # the training tensors and texts, made here: they reach the caller through the object store
                traj.prepare(self.codec)
            except Exception as err:  # e.g. out of memory: the episode fails, the actor goes on
                error = f"ray: training data: {type(err).__name__}: {err}"
                traj = Trajectory.failed(error, job.config.failure_reward)
        try:
            body, large = wire.split(traj)
        except Exception as err:  # e.g. an env that put an unpicklable object in its info
            error = f"ray: the trajectory cannot be sent back: {type(err).__name__}: {err}"
            body, large = wire.split(Trajectory.failed(error, job.config.failure_reward))
        buffers = [np.frombuffer(buffer.raw(), dtype=np.uint8) for buffer in large]
        self.finished.append((job_id, body, buffers))
        self.finished_bytes += sum(b.nbytes for b in buffers)
        self._wake().set()

    async def _full(self) -> None:
        while self.finished_bytes < BATCH_BYTES:
            wake = self._wake()
            wake.clear()
            await wake.wait()

    def _wake(self) -> asyncio.Event:
        if self.wake is None:  # made on the actor's loop, on first use
            self.wake = asyncio.Event()
        return self.wake


def cut_batch(finished: list[Finished], limit: int) -> tuple[list[Finished], list[Finished]]:
    """``(reply, rest)``: the first episodes of ``finished`` whose large buffers stay within ``limit``
    bytes (at least one), and the ones left for the next reply."""
    total = 0
    for i, episode in enumerate(finished):
        total += _size(episode)
        if total > limit and i > 0:
            return finished[:i], finished[i:]
    return finished, []


def _size(episode: Finished) -> int:
    return sum(buffer.nbytes for buffer in episode[2])


def read_finished(body: bytes, buffers: list[np.ndarray], failure_reward: float) -> Trajectory:
    """A finished episode's trajectory, from its pickle and its buffers in the object store (read
    without a copy); a FAILED one saying why where it cannot be read."""
    try:
        with warnings.catch_warnings():  # the store's buffers are read-only; so are trajectory tensors
            warnings.simplefilter("ignore", UserWarning)
            return pickle.loads(body, buffers=buffers)
    except Exception as err:
        error = f"ray: the trajectory could not be read: {type(err).__name__}: {err}"
        return Trajectory.failed(error, failure_reward)
