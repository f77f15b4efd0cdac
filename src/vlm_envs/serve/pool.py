"""The server's side of its env worker processes: send a call, await its reply, restart the dead.

Each worker is a spawned process (:func:`vlm_envs.serve.worker.worker_main`) holding the env
sessions placed on it, reached through a socket pair (:mod:`vlm_envs.serve.pipe`). Everything here
runs on the server's event loop, with no thread of its own: a call is written to the pipe without
blocking (what the pipe does not take waits until it is writable), and its reply, read when the pipe
is readable, settles the call's future there and then. A worker that ends (its process sentinel turns
readable) fails the calls it held with the reason, tells ``on_death`` (the session table marks its
sessions lost) and is started again. A call past its deadline is ended inside the worker
(:mod:`vlm_envs.serve.limits`); a worker that, with calls pending, answers none for ``call_timeout_s``
(work no signal interrupts) is killed, with every session on it. One timer per worker watches that,
not one per call, and a call queued behind others is not timed while its worker keeps answering.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import pickle
import socket
from collections.abc import Callable, Mapping
from typing import Any

from vlm_envs.serve.limits import worker_environment
from vlm_envs.serve.pipe import READ_SIZE, Frames, Outbox, frame
from vlm_envs.serve.worker import Answer, WorkerSettings, worker_main

#: How long a stopping worker gets before it is killed (seconds).
STOP_TIMEOUT_S = 5.0
#: Workers that end before they are ready, in a row, before the pool stops starting them.
START_ATTEMPTS = 3
#: The call id of a worker's first message: it has started (its imports are done).
READY = -1


class WorkerDied(Exception):
    """The worker holding the session ended; the message says why."""


class _Process:
    """One worker process: its pipe, its unanswered calls and the timer watching them."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        ctx: Any,
        target: Callable,
        served: Mapping[str, str],
        settings: WorkerSettings,
        generation: int,
    ) -> None:
        self.generation = generation
        self.sock, child = socket.socketpair()
        self.process = ctx.Process(
            target=target, args=(child, dict(served), settings), daemon=True, name="vlm-envs-serve-worker"
        )
        try:
            with worker_environment():
                self.process.start()
        finally:
            child.close()
        self.sock.setblocking(False)
        self.frames = Frames()
        self.outbox = Outbox(self.sock)
        self.pending: dict[int, asyncio.Future] = {}
        self.ended = False
        self.killed_because: str | None = None
        self.ready = loop.create_future()  # settled once it has started, or ended
        self.gone = loop.create_future()  # settled once it has ended and its calls have failed
        self.progress = 0.0  # loop time: when the worker last answered, or began on a call when idle
        self.timer: asyncio.TimerHandle | None = None  # the call timeout's watch, while calls are pending

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
        """Start every worker, on ``loop`` (the running loop: their pipes are read there)."""
        self._loop = loop
        for index in range(len(self._procs)):
            self._start(index)

    async def wait_ready(self, timeout: float) -> bool:
        """Wait until every worker has started (their imports done); ``False`` on timeout."""
        waiting = [proc.ready for proc in self._procs if proc is not None]
        _, late = await asyncio.wait(waiting, timeout=timeout) if waiting else (None, ())
        return not late

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
        if proc.ended:
            raise WorkerDied(proc.killed_because or "the worker holding this session died")
        call_id = next(self._ids)
        try:
            proc.outbox.send(frame(pickle.dumps((op, call_id, session_id, payload), protocol=5)))
        except OSError as err:
            raise WorkerDied(f"the worker holding this session cannot be reached: {err}") from err
        if proc.outbox:
            self._loop_of().add_writer(proc.sock, self._flush, proc)
        future = self._loop_of().create_future()
        if not proc.pending:  # an idle worker starts on this call now
            proc.progress = self._loop_of().time()
        proc.pending[call_id] = future
        if proc.timer is None:
            self._watch(index, proc)
        try:
            return await future
        finally:
            proc.pending.pop(call_id, None)

    def kill(self, index: int, reason: str) -> None:
        """Kill worker ``index``; its sessions are lost with ``reason`` and it starts again."""
        proc = self._procs[index]
        if proc is not None and not proc.ended:
            proc.killed_because = reason
            proc.process.kill()

    async def close(self) -> None:
        """Stop every worker (their sessions end): ``stop`` to each, then a kill for any still there
        after :data:`STOP_TIMEOUT_S`."""
        self._closing = True
        procs = [proc for proc in self._procs if proc is not None and not proc.ended]
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.outbox.send(frame(pickle.dumps(("stop", 0, "", None))))
            if proc.outbox:
                self._loop_of().add_writer(proc.sock, self._flush, proc)
        gone = [proc.gone for proc in procs]
        _, late = await asyncio.wait(gone, timeout=STOP_TIMEOUT_S) if gone else (None, set())
        if late:
            for proc in procs:
                proc.process.kill()
            await asyncio.wait(late, timeout=STOP_TIMEOUT_S)
        self._procs = [None] * len(self._procs)

    # ---- internals: all on the loop -------------------------------------------------------------------

    def _loop_of(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "start() first"
        return self._loop

    def _start(self, index: int) -> None:
        loop = self._loop_of()
        proc = _Process(loop, self._ctx, self.target, self.served, self.settings, next(self._generations))
        self._procs[index] = proc
        loop.add_reader(proc.sock, self._read, proc)
        loop.add_reader(proc.process.sentinel, self._end, index, proc)

    def _read(self, proc: _Process) -> None:
        """The pipe is readable: settle the calls whose replies came."""
        if self._receive(proc) is None:  # the worker closed its end: its sentinel says when it has ended
            self._loop_of().remove_reader(proc.sock)

    def _receive(self, proc: _Process) -> int | None:
        """Settle the calls whose replies one read of the pipe completes; the bytes read (0: none
        waiting), ``None`` once the pipe is closed."""
        try:
            data = proc.sock.recv(READ_SIZE)
        except BlockingIOError:
            return 0
        except OSError:
            return None
        if not data:
            return None
        proc.progress = self._loop_of().time()
        for message in proc.frames.feed(data):
            call_id, answer = pickle.loads(message)
            if call_id == READY:
                self._failed_starts = 0
                if not proc.ready.done():
                    proc.ready.set_result(None)
                continue
            future = proc.pending.get(call_id)
            if future is not None and not future.done():
                future.set_result(answer)
        return len(data)

    def _flush(self, proc: _Process) -> None:
        """The pipe is writable again: write what waits."""
        try:
            proc.outbox.flush()
        except OSError:  # the worker is gone: its sentinel fails the calls
            pass
        else:
            if proc.outbox:
                return
        self._loop_of().remove_writer(proc.sock)

    def _watch(self, index: int, proc: _Process) -> None:
        """The worker's one call-timeout timer: due ``call_timeout_s`` after its last sign of progress."""
        proc.timer = self._loop_of().call_at(proc.progress + self.call_timeout_s, self._check, index, proc)

    def _check(self, index: int, proc: _Process) -> None:
        proc.timer = None
        if not proc.pending or proc.ended:
            return
        if self._loop_of().time() - proc.progress >= self.call_timeout_s:
            self.kill(index, f"its worker answered nothing for {self.call_timeout_s:g} s, so it was killed")
        else:
            self._watch(index, proc)

    def _end(self, index: int, proc: _Process) -> None:
        """``proc`` has ended: fail its calls, restart it (unless closing or broken), say so."""
        loop = self._loop_of()
        loop.remove_reader(proc.process.sentinel)
        while proc.pending and self._receive(proc):  # replies it wrote before it ended still answer
            pass
        loop.remove_reader(proc.sock)
        loop.remove_writer(proc.sock)
        proc.process.join()  # its sentinel is readable: it has exited, this only reaps it
        code = proc.process.exitcode
        reason = proc.killed_because or f"the worker process holding this session died (exit code {code})"
        was_ready, proc.ended = proc.ready.done(), True
        if proc.timer is not None:
            proc.timer.cancel()
            proc.timer = None
        if not was_ready and proc.killed_because is None:
            self._failed_starts += 1
            if self._failed_starts >= START_ATTEMPTS:  # a new one would fail the same way
                self.broken = f"env workers cannot start (exit code {code}); see the server's log"
        if not proc.ready.done():
            proc.ready.set_result(None)
        proc.sock.close()
        for future in proc.pending.values():
            if not future.done():
                future.set_exception(WorkerDied(reason))
        proc.pending = {}
        proc.gone.set_result(None)
        if not (self._closing or self._procs[index] is not proc or self.broken):
            self._start(index)  # first, so a session moved off the dead worker lands on its successor
            self.on_death(index, proc.generation, reason)
