"""A pool of worker processes that run one call each under a hard wall-clock limit.

One *zygote* (a plain ``python`` subprocess running :mod:`vlm_envs.verify._worker`) imports and warms up
once, then forks a worker whenever the pool needs one, in milliseconds: a worker killed at its deadline
is replaced at once, and the pool grows with the calls in flight (up to ``max_size``), so a slow call
holds one worker and never the callers behind it: a caller that waited ``GROW_AFTER`` seconds gets a
worker of its own. A call is bounded twice by its limit: its wait for a worker (counted from its
submission; only the pool's own start-up is not counted) and its run in the worker. Calls and replies
are JSON lines on one socket per worker, tagged with an id the reply must echo; a worker that fails a
call in any way (timeout, garbage, the wrong id, an error of the caller's own) is killed, never asked
again. Nothing is unpickled and the host's ``__main__`` is never re-imported. Any number of threads may
call :meth:`WorkerPool.call` at once.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

# The zygote finds this very copy of vlm_envs even when the host put it on sys.path by hand.
_BOOTSTRAP = (
    f"import sys; sys.path.append({str(Path(__file__).resolve().parents[2])!r}); "
    "from vlm_envs.verify._worker import main; main(sys.argv[1:])"
)
#: Largest time limit of one call, in seconds.
MAX_TIMEOUT = 60.0
#: Seconds a call waits for a busy worker to come free before the pool forks one more for it: a burst
#: of quick calls is served by the warm workers, a slow call makes room for the callers behind it.
GROW_AFTER = 0.05
#: Seconds the zygote may take to fork one worker before it counts as broken.
_FORK_TIMEOUT = 10.0


class WorkerTimeout(Exception):
    """The call overran its time limit; its worker was killed."""


class WorkerFailed(Exception):
    """The worker died, failed to start, or answered garbage (the message says which)."""


class CallFailed(WorkerFailed):
    """The called function raised inside a healthy worker (the message names the exception)."""


def check_timeout(value: object, name: str = "timeout") -> float:
    """``value`` as seconds if it is a finite number in ``(0, MAX_TIMEOUT]``; ``ValueError`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_TIMEOUT:
        raise ValueError(f"{name} must be a number of seconds in (0, {MAX_TIMEOUT:g}], got {value!r}")
    return float(value)


class _Channel:
    """Newline-delimited messages on a socket, each read and write bounded by a deadline."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed_by_peer = False
        self._buffer = b""

    def send(self, data: bytes, deadline: float) -> None:
        self._settimeout(deadline)
        try:
            self.sock.sendall(data)
        except TimeoutError as exc:
            raise WorkerTimeout from exc
        except OSError as exc:
            raise WorkerFailed(f"worker socket closed: {exc}") from exc

    def read_line(self, deadline: float) -> bytes:
        while b"\n" not in self._buffer:
            self._settimeout(deadline)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError as exc:
                raise WorkerTimeout from exc
            except OSError as exc:
                raise WorkerFailed(f"worker socket failed: {exc}") from exc
            if not chunk:
                self.closed_by_peer = True
                raise WorkerFailed("worker exited")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def _settimeout(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerTimeout
        self.sock.settimeout(left)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class _Worker:
    """One forked worker: its socket and pid. Used by one thread at a time."""

    def __init__(self, sock: socket.socket, pid: int, generation: int) -> None:
        self.channel = _Channel(sock)
        self.pid = pid
        self.generation = generation

    def call(self, request_id: int, func: str, args: list[Any], deadline: float) -> Any:
        """Send one request and read its reply; any failure raises (and leaves the worker unusable)."""
        seconds = max(0.0, deadline - time.monotonic())
        request = json.dumps({"id": request_id, "f": func, "a": args, "t": seconds}) + "\n"
        self.channel.send(request.encode(), deadline)
        line = self.channel.read_line(deadline)
        try:
            reply = json.loads(line)
        except ValueError as exc:
            raise WorkerFailed(f"worker sent {line!r:.200}") from exc
        if not isinstance(reply, dict) or ("ok" not in reply and "err" not in reply):
            raise WorkerFailed(f"worker sent {line!r:.200}")
        if reply.get("id") != request_id:
            raise WorkerFailed(f"worker out of step: reply to call {reply.get('id')!r}, not {request_id}")
        if "err" in reply:
            raise CallFailed(str(reply["err"]))
        return reply["ok"]

    def kill(self) -> None:
        """Kill the process (unless it is known to have exited: its pid may be reused) and close."""
        if not self.channel.closed_by_peer:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self.channel.close()

    def stop(self) -> None:
        """Close the socket; the worker exits when it reads the end."""
        self.channel.close()


class _Zygote:
    """The process that forks workers; it and its workers share a process group of their own."""

    def __init__(self, init: str | None, max_memory_mb: int) -> None:
        cmd = [sys.executable, "-c", _BOOTSTRAP, "--max-memory-mb", str(max_memory_mb)]
        if init:
            cmd += ["--init", init]
        host, child = socket.socketpair()
        try:
            # a session of its own: Ctrl-C in a terminal reaches the caller, which stops its workers (a
            # worker in the terminal's process group printed a KeyboardInterrupt traceback of its own)
            self.proc = subprocess.Popen(cmd, stdin=child.fileno(), close_fds=True, start_new_session=True)
        finally:
            child.close()
        self.control = _Channel(host)
        self._lock = threading.Lock()

    def wait_ready(self, timeout: float) -> None:
        """Block until the zygote has imported and warmed up."""
        try:
            line = self.control.read_line(time.monotonic() + timeout)
        except WorkerTimeout as exc:
            raise WorkerFailed(f"the grading processes did not start within {timeout} s") from exc
        if line != b"ready":
            raise WorkerFailed(f"the grading zygote sent {line!r:.200} instead of ready")

    def fork(self, generation: int) -> _Worker:
        """A new worker, forked from the warm zygote."""
        host, child = socket.socketpair()
        try:
            with self._lock:
                try:
                    socket.send_fds(self.control.sock, [b"f"], [child.fileno()])
                except OSError as exc:
                    raise WorkerFailed(f"the grading zygote is gone: {exc}") from exc
                line = self.control.read_line(time.monotonic() + _FORK_TIMEOUT)
        except BaseException:
            host.close()
            raise
        finally:
            child.close()
        try:
            return _Worker(host, int(line), generation)
        except ValueError as exc:
            host.close()
            raise WorkerFailed(f"the grading zygote sent {line!r:.200} instead of a pid") from exc

    def stop(self) -> None:
        """Kill the zygote and every worker it forked (one process group), and reap the zygote."""
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.control.close()


class _Slot:
    """A caller waiting for a worker; served first come, first served."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.worker: _Worker | None = None


class WorkerPool:
    """Workers forked on demand, at most ``max_size`` (default ``size``) at once; :meth:`call` runs one
    function call in one.

    ``size`` workers are kept idle between calls. ``init`` names a ``module:function`` run once before
    any worker is forked (imports, warm-up). ``max_memory_mb`` caps each process's address space
    (POSIX); 0 leaves it uncapped. Callers waiting for a worker (all ``max_size`` busy) are served in
    arrival order.
    """

    def __init__(
        self,
        size: int,
        *,
        max_size: int | None = None,
        init: str | None = None,
        max_memory_mb: int = 0,
        startup_timeout: float = 60.0,
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least 1 worker, got {size}")
        self.size = size
        self.max_size = size if max_size is None else max_size
        if self.max_size < size:
            raise ValueError(f"max_size {self.max_size} is below size {size}")
        self.pid = os.getpid()
        self._init = init
        self._max_memory_mb = max_memory_mb
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._zygote: _Zygote | None = None
        self._ready_at = 0.0
        self._generation = 0
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._forking = 0
        self._waiting: deque[_Slot] = deque()
        self._ids = itertools.count()

    def call(self, func: str, args: list[Any], timeout: float, *, submitted: float | None = None) -> Any:
        """Run ``func(*args)`` in a worker; :class:`WorkerTimeout` if it runs over ``timeout`` seconds (the
        worker is killed), or if no worker comes free within ``timeout`` seconds of ``submitted`` (a
        ``time.monotonic()`` reading; default now) or of the pool's start, whichever is later.

        ``func`` is ``"module:function"``; arguments and result travel as JSON. :class:`CallFailed` if the
        function raised, :class:`WorkerFailed` if the worker died or misbehaved.
        """
        timeout = check_timeout(timeout)
        submitted = time.monotonic() if submitted is None else submitted
        ready_at = self._start()
        worker = self._acquire(max(submitted, ready_at) + timeout)
        deadline = time.monotonic() + timeout
        healthy = False
        try:
            result = worker.call(next(self._ids), func, args, deadline)
            healthy = True
        except CallFailed:
            healthy = True
            raise
        finally:
            if healthy:
                self._release(worker)
            else:
                self._discard(worker)
        return result

    def close(self) -> None:
        """Stop the zygote and every worker. Later calls (and callers waiting now) start afresh."""
        with self._start_lock, self._lock:
            zygote, self._zygote = self._zygote, None
            self._generation += 1
            workers, self._all, self._idle = list(self._all), set(), []
            waiting, self._waiting = list(self._waiting), deque()
        for slot in waiting:
            slot.ready.set()  # no worker: the caller tries again
        for worker in workers:
            worker.stop()
        if zygote is not None:
            zygote.stop()

    def abandon(self) -> None:
        """In a forked child: close the inherited sockets to the parent's processes without touching them.

        Takes no lock (the fork may have copied it held); the pool is unusable afterwards.
        """
        workers, self._all = list(self._all), set()
        for worker in workers:
            worker.channel.close()
        if self._zygote is not None:
            self._zygote.control.close()
            self._zygote = None

    def _start(self) -> float:
        """Start the zygote unless it runs; the time it became ready."""
        with self._start_lock:
            if self._zygote is None:
                zygote = _Zygote(self._init, self._max_memory_mb)
                try:
                    zygote.wait_ready(self._startup_timeout)
                except BaseException:
                    zygote.stop()
                    raise
                with self._lock:
                    self._zygote, self._ready_at = zygote, time.monotonic()
            return self._ready_at

    def _acquire(self, deadline: float) -> _Worker:
        """An idle worker; else a new one (at once while fewer than ``size`` run, after ``GROW_AFTER``
        seconds of waiting while fewer than ``max_size`` run and no other is being forked); else the
        next one released before ``deadline``."""
        grow_at = time.monotonic() + GROW_AFTER
        while True:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
                zygote, generation = self._zygote, self._generation
                running = len(self._all) + self._forking
                # past ``size``, one fork at a time: a burst of quick calls frees workers faster than
                # the zygote forks new ones
                grow = running < self.max_size and not self._forking and time.monotonic() >= grow_at
                fork = zygote is not None and (running < self.size or grow)
                slot = None
                if fork:
                    self._forking += 1
                elif zygote is not None:
                    slot = _Slot()
                    self._waiting.append(slot)
            if zygote is None:  # closed meanwhile
                self._start()
                continue
            if slot is None:
                return self._fork(zygote, generation)
            now = time.monotonic()
            # while it may grow, the pool looks again after GROW_AFTER (another fork may have ended)
            until = max(grow_at, now + GROW_AFTER) if running < self.max_size else deadline
            if not slot.ready.wait(max(0.0, min(until, deadline) - now)):
                with self._lock:
                    if slot.worker is None:
                        with contextlib.suppress(ValueError):
                            self._waiting.remove(slot)
                        if time.monotonic() >= deadline:
                            raise WorkerTimeout
                        continue
            if slot.worker is not None:
                return slot.worker

    def _fork(self, zygote: _Zygote, generation: int) -> _Worker:
        """Fork a worker (its place was reserved in ``_forking``); a zygote that fails is restarted."""
        worker = None
        try:
            worker = zygote.fork(generation)
        except (WorkerFailed, WorkerTimeout) as exc:
            self._restart(zygote)
            raise WorkerFailed(f"could not start a grading worker: {exc or 'timeout'}") from exc
        finally:
            with self._lock:
                self._forking -= 1
                if worker is not None and generation == self._generation:
                    self._all.add(worker)
        return worker

    def _restart(self, zygote: _Zygote) -> None:
        """A zygote that failed to fork is stopped with all its workers; the next call starts another."""
        with self._lock:
            if self._zygote is not zygote:
                return
        self.close()

    def _release(self, worker: _Worker) -> None:
        """Hand a healthy worker to the longest waiter, keep it idle, or retire it."""
        with self._lock:
            current = worker.generation == self._generation and worker in self._all
            if current and self._waiting:
                slot = self._waiting.popleft()
                slot.worker = worker
                slot.ready.set()
                return
            if current and len(self._idle) < self.size:
                self._idle.append(worker)
                return
            self._all.discard(worker)
        worker.stop()

    def _discard(self, worker: _Worker) -> None:
        """Kill a worker that failed; its place goes to the longest waiter, who forks a new one."""
        worker.kill()
        with self._lock:
            if worker not in self._all:
                return
            self._all.discard(worker)
            if self._waiting:
                self._waiting.popleft().ready.set()
