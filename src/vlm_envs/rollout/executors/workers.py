"""Episodes in worker processes: the rollout's CPU work on every core, not on one.

The per-turn work of an episode (env step, chat template, image processing, payload encoding) holds
Python's GIL, so one process tops out near one core however many episodes wait on the engine.
:class:`EpisodeWorkers` starts ``processes`` spawned workers, each with its own event loop, codec
and engine client, and plays whole episodes there with the env steps inline on the worker's loop:
one message out per episode (what to play) and one back (the finished :class:`Trajectory` with
its training tensors, made in the worker and mapped here from shared memory without a copy,
see :mod:`vlm_envs.rollout.executors.wire`). The caller's event loop only waits, so it stays responsive.

A worker that dies fails its running episodes (FAILED, with the exit code) and is started again
for the next ones; so does a worker whose loop has not said it is alive for ``stuck_after_s`` (an
env step or processor call that never returns holds every episode of its worker), which is killed.
A worker that cannot even start (its codec or engine fails to build) fails every episode at once
with that error instead of restarting in a loop.
"""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable
from typing import Any

from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.executors.aborts import AbortWatch
from vlm_envs.rollout.executors.handoff import Waiter
from vlm_envs.rollout.executors.slots import Slots
from vlm_envs.rollout.executors.wire import ARENA_BYTES, Receiver, Sender, arena_size
from vlm_envs.rollout.executors.worker_process import (
    ALIVE_EVERY_S,
    MAX_WORKER_PROCESSES,
    STOP_TIMEOUT_S,
    EpisodeJob,
    WorkerSpec,
    worker_main,
)
from vlm_envs.rollout.trajectory import Trajectory

__all__ = ["EpisodeJob", "EpisodeWorkers"]


class EpisodeWorkers:
    """Plays episodes in ``processes`` worker processes; :meth:`run` is the async entry point.

    ``processor`` is what :class:`ChatCodec` takes (a Qwen-VL processor or a tokenizer); it is
    pickled to each worker once. ``make_engine`` is called once in each worker to build its engine
    client and must be picklable (``functools.partial(SGLangEngine, url)``). ``args`` (slime's) is
    handed to every env factory. Workers start on the first :meth:`run`, or at :meth:`start`. A
    worker whose loop is blocked for ``stuck_after_s`` is killed and its episodes fail. Episodes go
    to the least loaded worker, at most ``max_in_flight`` per worker (``None``: no bound); callers
    beyond that wait for a free slot.
    """

    def __init__(
        self,
        processes: int,
        processor: Any,
        make_engine: Callable[[], Engine],
        *,
        args: Any = None,
        chat_template: str | None = None,
        cache_bytes: int = 256 << 20,
        stuck_after_s: float = 120.0,
        max_in_flight: int | None = None,
    ) -> None:
        if type(processes) is not int or not 1 <= processes <= MAX_WORKER_PROCESSES:
            raise ValueError(
                f"processes must be an int from 1 to {MAX_WORKER_PROCESSES}, got {processes!r:.40}"
            )
        if stuck_after_s <= ALIVE_EVERY_S:
            raise ValueError(f"stuck_after_s must exceed {ALIVE_EVERY_S} s, got {stuck_after_s}")
        self.stuck_after_s = stuck_after_s
        arena_bytes = arena_size(ARENA_BYTES, arenas=processes)  # the caller maps them all
        self._spec = WorkerSpec(processor, make_engine, args, chat_template, cache_bytes, arena_bytes)
        self._ctx = multiprocessing.get_context("spawn")  # safe with threads, torch and a running loop
        self._workers: list[_Worker | None] = [None] * processes
        self._slots = Slots(processes, max_in_flight)
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._aborts = AbortWatch(lambda worker, job_id: worker.abort(job_id))
        self._broken: str | None = None
        self._closed = threading.Event()
        self._watchdog: threading.Thread | None = None

    @property
    def processes(self) -> int:
        return len(self._workers)

    def start(self) -> None:
        """Start every worker now (they build their codec and engine while the caller goes on)."""
        with self._lock:
            for index in range(len(self._workers)):
                self._alive_worker(index)

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory:
        """Play ``job`` in a worker; never raises for env, engine, codec or worker failures."""
        job_id = next(self._ids)
        waiter = Waiter(job.config.failure_reward)
        index = await self._slots.take()
        try:
            try:
                worker = self._submit(index, job_id, job, waiter)
            except Exception as err:  # a worker that cannot start or take the job fails this episode only
                return Trajectory.failed(f"worker: {type(err).__name__}: {err}", job.config.failure_reward)
            if worker is None:
                error = self._broken or "worker: workers kept ending before taking the episode"
                return Trajectory.failed(error, job.config.failure_reward)
            self._aborts.watch(job_id, worker, should_abort)
            return await waiter.trajectory()
        finally:
            self._aborts.forget(job_id)
            self._slots.give_back(index)

    def close(self) -> None:
        """Stop the workers; running episodes end FAILED. A later :meth:`run` starts them again."""
        with self._lock:
            workers, self._workers = self._workers, [None] * len(self._workers)
            self._closed.set()
            watchdog, self._watchdog = self._watchdog, None
        for worker in workers:
            if worker is not None:
                worker.close()
        if watchdog is not None:
            watchdog.join(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> EpisodeWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- internals --------------------------------------------------------------------------------

    def _submit(self, index: int, job_id: int, job: EpisodeJob, waiter: Waiter) -> _Worker | None:
        """Send ``job`` to the worker of slot ``index`` (started again if it ended); ``None`` when
        the pool is broken or the workers kept ending before taking it."""
        for _ in range(3):  # a worker that just ended takes nothing; its replacement does
            if self._broken is not None:
                return None
            with self._lock:
                worker = self._alive_worker(index)
            if worker.submit(job_id, job, waiter):
                return worker
        return None

    def _alive_worker(self, index: int) -> _Worker:
        worker = self._workers[index]
        if worker is None or not worker.alive:
            worker = _Worker(self._ctx, self._spec, on_fatal=self._on_fatal)
            self._workers[index] = worker
        if self._watchdog is None:
            self._closed.clear()
            self._watchdog = threading.Thread(target=self._kill_stuck, daemon=True, name="vlm-envs-watchdog")
            self._watchdog.start()
        return worker

    def _kill_stuck(self) -> None:
        """Kill any started worker with episodes whose loop has been silent for ``stuck_after_s``."""
        while not self._closed.wait(ALIVE_EVERY_S):
            with self._lock:
                workers = [w for w in self._workers if w is not None]
            for worker in workers:
                if worker.silent_for() > self.stuck_after_s:
                    worker.kill(
                        f"the worker's loop was blocked for over {self.stuck_after_s:.0f} s (an env step or "
                        "processor call that does not return), so it was killed"
                    )

    def _on_fatal(self, error: str) -> None:
        self._broken = f"worker: {error}"


class _Worker:
    """One worker process, the caller-side thread that writes to it and the one that reads from it."""

    def __init__(self, ctx: Any, spec: WorkerSpec, on_fatal: Callable[[str], None]) -> None:
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=worker_main, args=(child, spec), daemon=True, name="vlm-envs-episode-worker"
        )
        self.process.start()
        child.close()
        self.pending: dict[int, Waiter] = {}
        self.lock = threading.Lock()
        self.on_fatal = on_fatal
        self.closing = False
        self.ended = False
        self.killed_because: str | None = None
        self.last_heard: float | None = None  # monotonic time of the last message, once it is ready
        self.sender = Sender(self.conn)
        self.receiver = Receiver(self.conn, release=self._release_region)
        self.reader = threading.Thread(target=self._read, daemon=True, name="vlm-envs-worker-reader")
        self.reader.start()

    @property
    def alive(self) -> bool:
        return not self.ended

    def submit(self, job_id: int, job: EpisodeJob, waiter: Waiter) -> bool:
        """Send the job, whose trajectory goes to ``waiter``; ``False`` if this worker has ended."""
        # the job as a pickle of its own, which the worker reads apart; an unpicklable job fails here
        data = pickle.dumps(("run", job_id, pickle.dumps(job.portable(), protocol=5)), protocol=5)
        with self.lock:
            if self.ended:
                return False
            self.pending[job_id] = waiter
        self.sender.put(data)
        return True

    def _release_region(self, offset: int) -> None:
        """The caller's last view of a region of the worker's arena is gone (from any thread)."""
        if not self.ended:
            self.sender.put(pickle.dumps(("free", offset, None)))

    def abort(self, job_id: int) -> None:
        if job_id in self.pending:
            self.sender.put(pickle.dumps(("abort", job_id, None)))

    def silent_for(self) -> float:
        """Seconds since a started worker with running episodes last spoke (0 otherwise)."""
        if self.last_heard is None or not self.pending or self.ended:
            return 0.0
        return time.monotonic() - self.last_heard

    def kill(self, reason: str) -> None:
        self.killed_because = reason
        self.process.kill()

    def _read(self) -> None:
        reason, ready, fatal = "the worker process ended", False, False
        try:
            while True:
                kind, job_id, payload = self.receiver.recv()
                self.last_heard = time.monotonic() if ready or kind == "ready" else None
                if kind == "done":
                    # in a box the caller empties: this thread keeps no reference (see handoff.py)
                    box, payload = [payload], None
                    self._settle(job_id, box)
                elif kind == "unread":  # the worker could not read that job: it fails alone
                    self._fail(job_id, f"worker: {payload}")
                elif kind == "ready":
                    ready = True
                elif kind == "fatal":
                    reason, fatal = f"the worker could not start: {payload}", True
        except (EOFError, OSError):
            pass
        except Exception as err:  # a reply that cannot be read: this worker is no longer trusted
            reason = f"unreadable reply from the worker: {type(err).__name__}: {err}"
            self.process.kill()
        self.process.join(timeout=STOP_TIMEOUT_S)
        code = self.process.exitcode
        if not ready and not self.closing and (fatal or (code or 0) > 0):
            # it failed by itself before taking any job (not killed): a new one would fail the same way
            self.on_fatal(f"{reason} (exit code {code})")
        reason = self.killed_because or ("the worker pool was closed" if self.closing else reason)
        with self.lock:  # from here on submit() refuses, so no job can be left behind
            self.ended = True
            orphans, self.pending = self.pending, {}
        for waiter in orphans.values():
            waiter.fail(f"worker: {reason} (exit code {code})")

    def _take(self, job_id: int) -> Waiter | None:
        with self.lock:
            return self.pending.pop(job_id, None)

    def _settle(self, job_id: int, box: list[Trajectory]) -> None:
        waiter = self._take(job_id)
        if waiter is not None:
            waiter.hand_over(box)

    def _fail(self, job_id: int, error: str) -> None:
        waiter = self._take(job_id)
        if waiter is not None:
            waiter.fail(error)

    def close(self) -> None:
        self.closing = True
        self.sender.put(pickle.dumps(("stop", 0, None)))
        self.sender.close()
        self.process.join(timeout=STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
        self.reader.join(timeout=STOP_TIMEOUT_S)
        self.receiver.close()
        self.conn.close()
