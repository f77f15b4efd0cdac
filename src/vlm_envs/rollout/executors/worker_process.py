"""Inside an episode worker process: build a codec and an engine, then play the episodes sent.

The caller side is :class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`. Messages both ways are
pickled ``(kind, job_id, payload)`` tuples: ``run``/``abort``/``free``/``stop`` to the worker,
``run`` carrying the job as a pickle of its own (read apart, so a job the worker cannot read fails
alone); ``ready``/``fatal``/``alive``/``done``/``unread`` back (:mod:`vlm_envs.rollout.executors.wire`
messages), ``done`` carrying the finished trajectory with its training tensors in shared memory,
``unread`` why a job could not be read here. Env steps run inline on the worker's loop: that is
what the worker is for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import pickle
import threading
import types
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

from vlm_envs.registry import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors.wire import ARENA_BYTES, SEND_TIMEOUT_S, Packer, Sender, plain
from vlm_envs.rollout.offload import INLINE
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.resume import ResumeRequest
from vlm_envs.rollout.trajectory import Trajectory

#: How long a stopping worker gets to finish before it is killed (seconds).
STOP_TIMEOUT_S = SEND_TIMEOUT_S
#: How often a worker's event loop says it is alive (seconds).
ALIVE_EVERY_S = 1.0
#: The most worker processes one pool starts: past the cores of the largest machines, a count is a typo
#: (10,000,000 workers would spawn until the machine runs out of processes).
MAX_WORKER_PROCESSES = 256
#: Container allocations between two young collections in a worker (Python's default: 700). With
#: hundreds of episodes in flight most young objects are still alive when collected, so frequent
#: collections find little; with 2,000 Sokoban episodes in flight this cut a worker's collector
#: from 6% of its CPU to 2.5% (``benchmarks/scaling.py``).
YOUNG_COLLECTION_EVERY = 10_000
#: Added to a worker's niceness: when the caller's loop and a worker both want a core, the loop
#: (which serves the trainer and every engine call) gets it first; the workers lose no throughput.
WORKER_NICENESS = 5
#: The fields of a trainer's sample that env factories read (slime's ``Sample``: the task, not the
#: rollout's state); a job that leaves this process carries these only (:meth:`EpisodeJob.portable`).
SAMPLE_TASK_FIELDS = ("index", "group_index", "prompt", "label", "metadata", "multimodal_inputs")


@dataclasses.dataclass(frozen=True)
class EpisodeJob:
    """What to play: the env (entry-point name or module path), its build inputs, and the episode."""

    env: str
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: The trainer's sample, handed to the env factory (slime envs read their task from it).
    sample: Any = None
    seed: int | None = None
    config: EpisodeConfig = dataclasses.field(default_factory=EpisodeConfig)
    sampling_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: The prompt if the env's first observation is empty (encoded in the worker).
    fallback_prompt: FallbackPrompt | None = None
    #: An aborted episode handed back, to continue from its last finished turn instead of a reset.
    resume: ResumeRequest | None = None

    def portable(self) -> EpisodeJob:
        """This job as sent to a worker process or a Ray actor: its sample (unless ``None``, a
        mapping or already a namespace) a plain namespace of :data:`SAMPLE_TASK_FIELDS`, so the
        other side needs none of the trainer's classes (slime's) to read it. Out of process, an env
        factory's changes to the sample never reached the trainer anyway."""
        sample = self.sample
        if sample is None or isinstance(sample, Mapping | types.SimpleNamespace):
            return self
        fields = {name: getattr(sample, name) for name in SAMPLE_TASK_FIELDS if hasattr(sample, name)}
        return dataclasses.replace(self, sample=types.SimpleNamespace(**fields))


def unreadable_job(err: BaseException, remedy: str) -> str:
    """Why a job could not be unpickled where it was to play, and what to do (``remedy``: where to
    install what the job holds)."""
    what = f"{type(err).__name__}: {' '.join(str(err).split())}"
    return (
        f"the job could not be read where it plays ({what}); every class a job holds (in its env "
        f"config, its sample's fields) must be importable there: {remedy}"
    )


#: What to do about a job a local worker cannot read.
LOCAL_REMEDY = (
    "install that module in the workers' Python environment, or put its folder on PYTHONPATH "
    "(or sys.path) before the workers start"
)


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker builds itself from (pickled once, at its start)."""

    processor: Any
    make_engine: Callable[[], Engine]
    args: Any
    chat_template: str | None
    cache_bytes: int
    arena_bytes: int = ARENA_BYTES  # the shared memory of its messages (a local worker's only)


ALIVE = plain(("alive", 0, None))


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    """A worker: build the codec and engine, then play episodes until told to stop."""
    with contextlib.suppress(OSError):  # a platform without nice: the same, minus the priority
        os.nice(WORKER_NICENESS)
    sender = Sender(conn)
    try:
        codec = ChatCodec(spec.processor, chat_template=spec.chat_template, cache_bytes=spec.cache_bytes)
        engine = spec.make_engine()
    except Exception as err:
        sender.put(plain(("fatal", 0, f"{type(err).__name__}: {err}")))
        sender.close()
        return
    packer = Packer(spec.arena_bytes)
    sender.put(*packer.greeting(("ready", 0, None)))
    settle_collector()
    try:
        asyncio.run(_serve(conn, codec, engine, spec.args, sender, packer))
    finally:
        sender.close()


async def _serve(
    conn: Connection, codec: ChatCodec, engine: Engine, args: Any, sender: Sender, packer: Packer
) -> None:
    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    aborted: set[int] = set()
    tasks: set[asyncio.Task] = set()

    async def play(job_id: int, job: EpisodeJob) -> None:
        traj = await play_job(job_id, job, codec, engine, args, aborted)
        aborted.discard(job_id)
        try:  # the training tensors (in shared memory, where the caller reads them) and texts
            traj.prepare(codec, memory=packer.lend)
        except Exception as err:  # e.g. out of memory: the episode fails, the worker goes on
            error = f"worker: training data: {type(err).__name__}: {err}"
            traj = Trajectory.failed(error, job.config.failure_reward)
        try:
            message = packer.pack(("done", job_id, traj))
        except Exception as err:  # e.g. an env that put an unpicklable object in its info
            error = f"worker: the trajectory cannot be sent back: {type(err).__name__}: {err}"
            message = packer.pack(("done", job_id, Trajectory.failed(error, job.config.failure_reward)))
        sender.put(*message)

    def start(job_id: int, job: EpisodeJob) -> None:
        task = loop.create_task(play(job_id, job))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def stop() -> None:
        if not stopped.done():
            stopped.set_result(None)

    def read() -> None:
        """The caller's messages, on a thread of their own: a region the caller frees is free
        at once, not when this busy loop gets to it, so the arena stays small."""
        while True:
            try:  # plain types only: a job is a pickle of its own, read below
                kind, job_id, payload = pickle.loads(conn.recv_bytes())
            except (EOFError, OSError):  # the caller is gone
                kind = "stop"
            try:
                if kind == "free":  # the caller is done with a region of the arena
                    packer.release(job_id)
                elif kind == "run":
                    try:
                        job = pickle.loads(payload)
                    except Exception as err:  # e.g. a class whose module only the caller has
                        sender.put(plain(("unread", job_id, unreadable_job(err, LOCAL_REMEDY))))
                    else:
                        loop.call_soon_threadsafe(start, job_id, job)
                elif kind == "abort":
                    loop.call_soon_threadsafe(aborted.add, job_id)
                else:  # told to stop
                    loop.call_soon_threadsafe(stop)
                    return
            except RuntimeError:  # the loop is closed: this worker is ending
                return

    async def say_alive() -> None:  # silence means this loop is blocked (see stuck_after_s)
        while True:
            await asyncio.sleep(ALIVE_EVERY_S)
            sender.put(ALIVE)

    threading.Thread(target=read, daemon=True, name="vlm-envs-worker-inbox").start()
    alive = loop.create_task(say_alive())
    try:
        await stopped
    finally:
        alive.cancel()
        for task in tasks:
            task.cancel()
        close = getattr(engine, "close", None)
        if close is not None and asyncio.iscoroutinefunction(close):
            with contextlib.suppress(Exception):
                await close()


def settle_collector() -> None:
    """Tune the garbage collector of a process that plays episodes and nothing else (a worker, a
    Ray actor): what it holds once started (torch, transformers, the processor) lives as long as it
    does, so collections need not walk it, and young collections come less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])


async def play_job(
    job_id: int, job: EpisodeJob, codec: ChatCodec, engine: Engine, args: Any, aborted: set[int]
) -> Trajectory:
    """Build the job's env and play it with the env steps inline (a worker's or an actor's loop);
    the episode aborts once ``job_id`` is in ``aborted``."""
    try:
        env = build_env(job.env, sample=job.sample, args=args, **job.env_config)
    except Exception as err:  # an unknown env or a bad config fails this episode only
        return Trajectory.failed(f"env: {type(err).__name__}: {err}", job.config.failure_reward)
    try:
        return await run_episode(
            env,
            engine,
            codec,
            seed=job.seed,
            config=job.config,
            sampling_params=job.sampling_params,
            should_abort=lambda: job_id in aborted,
            executor=INLINE,
            fallback_prompt=job.fallback_prompt,
            resume=job.resume,
        )
    finally:
        with contextlib.suppress(Exception):  # an env that fails to close must not lose the episode
            env.close()
