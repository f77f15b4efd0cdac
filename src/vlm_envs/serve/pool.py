"""The server's side of its env worker processes: send a call, await its reply, restart the dead.

Each worker is a spawned process (:func:`vlm_envs.serve.worker.worker_main`) holding the env
sessions placed on it. A call is written to its pipe from the event loop (the worker drains the
pipe on a thread of its own, so the write does not wait on env work) and answered through an
``asyncio`` future that a reader thread settles. A worker that dies fails the calls it held with
the reason, tells ``on_death`` (the session table marks its sessions lost) and is started again. A
call past its deadline is ended inside the worker (:mod:`vlm_envs.serve.limits`); a worker that, with
calls pending, answers none for ``call_timeout_s`` (work no signal interrupts) is killed, with every
session on it. A call queued behind others is not timed while its worker keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import pickle
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from vlm_envs.serve.limits import worker_environment
from vlm_envs.serve.worker import Answer, WorkerSettings, worker_main

#: How long a stopping worker gets before it is killed (seconds).
STOP_TIMEOUT_S = 5.0
#: Workers that end before they are ready, in a row, before the pool stops starting them.
START_ATTEMPTS = 3


class WorkerDied(Exception):
    """The worker holding the session ended; the message says why."""


class _Process:
    """One worker process, its pipe, its unanswered calls and the thread reading its replies."""

    def __init__(
        self, ctx: Any, target: Callable, served: Mapping[str, str], settings: WorkerSettings, generation: int
    ) -> None:
        self.generation = generation
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=target, args=(child, dict(served), settings), daemon=True, name="vlm-envs-serve-worker"
        )
        with worker_environment():
            self.process.start()
        child.close()
        self.pending: dict[int, asyncio.Future] = {}
        self.lock = threading.Lock()
        self.ended = False
        self.killed_because: str | None = None
        self.ready = threading.Event()
        self.progress = time.monotonic()  # when the worker last answered, or began on a call when idle

    @property
    def pid(self) -> int | None:
        return self.process.pid


class EnvWorkers:
    """``processes`` worker processes serving the envs in ``served`` (name -> what builds it)."""

    def __init__(
        self,
        processes: int,
        served: Mapping[str, str],
        *,
        call_timeout_s: float = 30.0,
        settings: WorkerSettings | None = None,
        on_death: Callable[[int, int, str], None] | None = None,
        target: Callable[[Any, Mapping[str, str], WorkerSettings], None] = worker_main,
    ) -> None:
        if processes < 1:
            raise ValueError(f"workers must be >= 1, got {processes}")
        self.served = dict(served)
        self.settings = settings or WorkerSettings()
        self.target = target  # what a worker process runs (worker_main; a test may swap it)
        self.call_timeout_s = call_timeout_s
        self.on_death = on_death or (lambda index, generation, reason: None)
        self._ctx = multiprocessing.get_context("spawn")  # safe beside threads and a running loop
        self._procs: list[_Process | None] = [None] * processes
        self._generations = itertools.count()
        self._ids = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._failed_starts = 0
        self.broken: str | None = None  # why workers cannot start, once they kept failing to

    @property
    def processes(self) -> int:
        return len(self._procs)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start every worker; replies are settled on ``loop``."""
        self._loop = loop
        for index in range(len(self._procs)):
            self._start(index)

    def wait_ready(self, timeout: float) -> bool:
        """Block until every worker has started (their imports done); ``False`` on timeout."""
        return all(proc.ready.wait(timeout) for proc in self._procs if proc is not None)

    def generation(self, index: int) -> int:
        proc = self._procs[index]
        return -1 if proc is None else proc.generation

    def pids(self) -> list[int | None]:
        return [None if p is None else p.pid for p in self._procs]

    async def call(self, index: int, generation: int, op: str, session_id: str, payload: Any) -> Answer:
        """Send one call to worker ``index`` and await its answer; :class:`WorkerDied` if the worker
        that holds the session (``generation``) is gone or dies before answering."""
        proc = self._procs[index]
        if self.broken is not None:
            raise WorkerDied(self.broken)
        if proc is None or proc.generation != generation:
            raise WorkerDied("the worker holding this session was restarted")
        call_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        with proc.lock:
            if proc.ended:
                raise WorkerDied(proc.killed_because or "the worker holding this session died")
            if not proc.pending:  # an idle worker starts on this call now
                proc.progress = time.monotonic()
            proc.pending[call_id] = future
        try:
            proc.conn.send_bytes(pickle.dumps((op, call_id, session_id, payload), protocol=5))
        except (OSError, ValueError) as err:
            with proc.lock:
                proc.pending.pop(call_id, None)
            raise WorkerDied(f"the worker holding this session cannot be reached: {err}") from err
        try:
            while True:  # a call queued behind others waits as long as its worker keeps answering
                silent_s = time.monotonic() - proc.progress
                try:
                    return await asyncio.wait_for(
                        asyncio.shield(future), max(0.0, self.call_timeout_s - silent_s)
                    )
                except asyncio.TimeoutError:
                    if time.monotonic() - proc.progress >= self.call_timeout_s:
                        self.kill(
                            index,
                            f"its worker answered nothing for {self.call_timeout_s:g} s, so it was killed",
                        )
                        return await future  # settled by the reader with the reason
        finally:
            with proc.lock:
                proc.pending.pop(call_id, None)

    def kill(self, index: int, reason: str) -> None:
        """Kill worker ``index``; its sessions are lost with ``reason`` and it starts again."""
        proc = self._procs[index]
        if proc is not None and not proc.ended:
            proc.killed_because = reason
            proc.process.kill()

    def close(self) -> None:
        """Stop every worker (their sessions end)."""
        self._closing = True
        procs, self._procs = self._procs, [None] * len(self._procs)
        for proc in procs:
            if proc is None:
                continue
            with contextlib.suppress(OSError, ValueError):
                proc.conn.send_bytes(pickle.dumps(("stop", 0, "", None)))
            proc.process.join(STOP_TIMEOUT_S)
            if proc.process.is_alive():
                proc.process.kill()
                proc.process.join(STOP_TIMEOUT_S)

    # ---- internals --------------------------------------------------------------------------------

    def _start(self, index: int) -> None:
        proc = _Process(self._ctx, self.target, self.served, self.settings, next(self._generations))
        self._procs[index] = proc
        threading.Thread(
            target=self._read, args=(index, proc), daemon=True, name="vlm-envs-serve-reader"
        ).start()

    def _read(self, index: int, proc: _Process) -> None:
        loop = self._loop
        assert loop is not None
        try:
            while True:
                call_id, answer = pickle.loads(proc.conn.recv_bytes())
                proc.progress = time.monotonic()
                if call_id == -1:
                    proc.ready.set()
                    self._failed_starts = 0
                    continue
                with proc.lock:
                    future = proc.pending.get(call_id)
                if future is not None:
                    loop.call_soon_threadsafe(_settle, future, answer)
        except (EOFError, OSError):
            pass
        proc.process.join(STOP_TIMEOUT_S)
        code = proc.process.exitcode
        reason = proc.killed_because or f"the worker process holding this session died (exit code {code})"
        with proc.lock:
            was_ready, proc.ended = proc.ready.is_set(), True
            orphans, proc.pending = list(proc.pending.values()), {}
        if not was_ready and proc.killed_because is None:
            self._failed_starts += 1
            if self._failed_starts >= START_ATTEMPTS:  # a new one would fail the same way
                self.broken = f"env workers cannot start (exit code {code}); see the server's log"
        proc.ready.set()
        proc.conn.close()
        replace = not (self._closing or self._procs[index] is not proc or self.broken or loop.is_closed())
        if replace:  # first, so a session moved off the dead worker lands on its successor
            self._start(index)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            for future in orphans:
                loop.call_soon_threadsafe(_fail, future, WorkerDied(reason))
            if replace:
                loop.call_soon_threadsafe(self.on_death, index, proc.generation, reason)


def _settle(future: asyncio.Future, result: Answer) -> None:
    if not future.done():
        future.set_result(result)


def _fail(future: asyncio.Future, err: Exception) -> None:
    if not future.done():
        future.set_exception(err)
