"""Inside an episode worker process: build a codec and an engine, then play the episodes sent.

The caller side is :class:`~vlm_envs.rollout.workers.EpisodeWorkers`. Messages both ways are
pickled ``(kind, job_id, payload)`` tuples: ``run``/``abort``/``stop`` to the worker;
``ready``/``fatal``/``alive``/``done`` back, ``done`` carrying the finished trajectory with its
tensors as plain buffers. Env steps run inline on the worker's loop: that is what the worker is for.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import io
import os
import pickle
import queue
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from typing import Any

import torch

from vlm_envs.registry import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines import Engine
from vlm_envs.rollout.episode import INLINE, EpisodeConfig, run_episode
from vlm_envs.rollout.prompt import FallbackPrompt
from vlm_envs.rollout.trajectory import Trajectory

#: How long a stopping worker gets to finish before it is killed (seconds).
STOP_TIMEOUT_S = 5.0
#: How often a worker's event loop says it is alive (seconds).
ALIVE_EVERY_S = 1.0
#: Added to a worker's niceness: when the caller's loop and a worker both want a core, the loop
#: (which serves the trainer and every engine call) gets it first; the workers lose no throughput.
WORKER_NICENESS = 5


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


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker builds itself from (pickled once, at its start)."""

    processor: Any
    make_engine: Callable[[], Engine]
    args: Any
    chat_template: str | None
    cache_bytes: int


class Sender:
    """Writes messages on its own thread, so a peer slow to read never blocks an event loop."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="vlm-envs-worker-sender")
        self.thread.start()

    def put(self, data: bytes) -> None:
        self.outbox.put(data)

    def close(self) -> None:
        """Send what is queued, then stop."""
        self.outbox.put(None)
        self.thread.join(timeout=STOP_TIMEOUT_S)

    def _run(self) -> None:
        while (data := self.outbox.get()) is not None:
            try:
                self.conn.send_bytes(data)
            except (OSError, ValueError):  # the peer is gone; its reader reports why
                return


class _BufferPickler(pickle.Pickler):
    """Pickles CPU tensors as numpy buffers (a memcpy) instead of torch's ``torch.save`` path."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and not obj.requires_grad:
            try:
                return torch.from_numpy, (obj.numpy(),)
            except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16): torch's own way
                return NotImplemented
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """``obj`` pickled for the trip from a worker (protocol 5, tensors as buffers)."""
    buf = io.BytesIO()
    _BufferPickler(buf, protocol=5).dump(obj)
    return buf.getvalue()


ALIVE = dumps(("alive", 0, None))


def worker_main(conn: Connection, spec: WorkerSpec) -> None:
    """A worker: build the codec and engine, then play episodes until told to stop."""
    with contextlib.suppress(OSError):  # a platform without nice: the same, minus the priority
        os.nice(WORKER_NICENESS)
    sender = Sender(conn)
    try:
        codec = ChatCodec(spec.processor, chat_template=spec.chat_template, cache_bytes=spec.cache_bytes)
        engine = spec.make_engine()
    except Exception as err:
        sender.put(dumps(("fatal", 0, f"{type(err).__name__}: {err}")))
        sender.close()
        return
    sender.put(dumps(("ready", 0, None)))
    # This process is ours: what it holds now (torch, transformers, the processor) lives as long as
    # it does, so full collections need not walk it with hundreds of episodes in flight.
    gc.collect()
    gc.freeze()
    try:
        asyncio.run(_serve(conn, codec, engine, spec.args, sender))
    finally:
        sender.close()


async def _serve(conn: Connection, codec: ChatCodec, engine: Engine, args: Any, sender: Sender) -> None:
    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    aborted: set[int] = set()
    tasks: set[asyncio.Task] = set()

    async def play(job_id: int, job: EpisodeJob) -> None:
        traj = await play_job(job_id, job, codec, engine, args, aborted)
        aborted.discard(job_id)
        try:
            data = dumps(("done", job_id, traj))
        except Exception as err:  # e.g. an env that put an unpicklable object in its info
            error = f"worker: the trajectory cannot be sent back: {type(err).__name__}: {err}"
            data = dumps(("done", job_id, Trajectory.failed(error, job.config.failure_reward)))
        sender.put(data)

    def on_readable() -> None:
        try:
            while conn.poll():  # take every waiting message: the caller may have sent a thousand
                kind, job_id, job = pickle.loads(conn.recv_bytes())
                if kind == "run":
                    task = loop.create_task(play(job_id, job))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                elif kind == "abort":
                    aborted.add(job_id)
                else:
                    break
            else:
                return
        except (EOFError, OSError):
            pass
        if not stopped.done():  # told to stop, or the caller is gone
            stopped.set_result(None)

    async def say_alive() -> None:  # silence means this loop is blocked (see stuck_after_s)
        while True:
            await asyncio.sleep(ALIVE_EVERY_S)
            sender.put(ALIVE)

    loop.add_reader(conn.fileno(), on_readable)
    alive = loop.create_task(say_alive())
    try:
        await stopped
    finally:
        loop.remove_reader(conn.fileno())
        alive.cancel()
        for task in tasks:
            task.cancel()
        close = getattr(engine, "close", None)
        if close is not None and asyncio.iscoroutinefunction(close):
            with contextlib.suppress(Exception):
                await close()


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
        )
    finally:
        with contextlib.suppress(Exception):  # an env that fails to close must not lose the episode
            env.close()
