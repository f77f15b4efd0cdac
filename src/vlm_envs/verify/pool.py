"""A small pool of worker processes that run one call each under a hard wall-clock limit.

Workers are plain ``python`` subprocesses running :mod:`vlm_envs.verify._worker` and talking JSON
lines over pipes, so the pool works the same whatever start method (fork, spawn, forkserver) the
host uses, never re-imports the host's ``__main__``, and never unpickles anything. A call that
overruns its limit gets its worker killed and replaced. Any number of threads may call
:meth:`WorkerPool.call` at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

# The worker finds this very copy of vlm_envs even when the host put it on sys.path by hand.
_BOOTSTRAP = (
    f"import sys; sys.path.append({str(Path(__file__).resolve().parents[2])!r}); "
    "from vlm_envs.verify._worker import main; main(sys.argv[1:])"
)


class WorkerTimeout(Exception):
    """The call overran its time limit; its worker was killed."""


class WorkerFailed(Exception):
    """The worker died, failed to start, or answered garbage (the message says which)."""


class CallFailed(WorkerFailed):
    """The called function raised inside a healthy worker (the message names the exception)."""


class _Worker:
    """One subprocess and its pipes; used by one thread at a time."""

    def __init__(self, init: str | None, max_memory_mb: int) -> None:
        cmd = [sys.executable, "-c", _BOOTSTRAP, "--max-memory-mb", str(max_memory_mb)]
        if init:
            cmd += ["--init", init]
        pipe = subprocess.PIPE
        # a session of its own: Ctrl-C in a terminal reaches the caller, which stops its workers (a
        # worker in the terminal's process group printed a KeyboardInterrupt traceback of its own)
        self.proc = subprocess.Popen(
            cmd, stdin=pipe, stdout=pipe, bufsize=0, close_fds=True, start_new_session=True
        )
        self._buffer = b""
        self.ready = False

    def wait_ready(self, timeout: float) -> None:
        """Block until the worker has imported and warmed up (not counted against a call's limit)."""
        if not self.ready:
            try:
                line = self._read_line(time.monotonic() + timeout)
            except WorkerTimeout as exc:
                raise WorkerFailed(f"worker did not start within {timeout} s") from exc
            if json.loads(line) != {"ready": True}:
                raise WorkerFailed(f"worker sent {line!r:.200} instead of ready")
            self.ready = True

    def call(self, func: str, args: list[Any], timeout: float) -> Any:
        request = (json.dumps({"f": func, "a": args}) + "\n").encode()
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(request)
        except OSError as exc:
            raise WorkerFailed(f"worker pipe closed: {exc}") from exc
        line = self._read_line(deadline)
        try:
            reply = json.loads(line)
        except ValueError as exc:
            raise WorkerFailed(f"worker sent {line!r:.200}") from exc
        if not isinstance(reply, dict) or ("ok" not in reply and "err" not in reply):
            raise WorkerFailed(f"worker sent {line!r:.200}")
        if "err" in reply:
            raise CallFailed(str(reply["err"]))
        return reply["ok"]

    def _read_line(self, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                raise WorkerTimeout
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                try:
                    code = self.proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = None
                raise WorkerFailed(f"worker exited with code {code}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            pipe.close()

    def stop(self, grace: float = 1.0) -> None:
        """Close stdin (the worker exits on EOF), then kill if it lingers."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=grace)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _Slot:
    """A caller waiting for a worker; served first come, first served."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.worker: _Worker | None = None


class WorkerPool:
    """``size`` worker processes, started on first use; :meth:`call` runs one function call in one of them.

    ``init`` names a ``module:function`` each worker runs before it takes calls (imports, warm-up).
    ``max_memory_mb`` caps each worker's address space (POSIX); 0 leaves it uncapped. Callers
    waiting for a free worker are served in arrival order.
    """

    def __init__(
        self, size: int, *, init: str | None = None, max_memory_mb: int = 0, startup_timeout: float = 60.0
    ) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least 1 worker, got {size}")
        self.size = size
        self.pid = os.getpid()
        self._init = init
        self._max_memory_mb = max_memory_mb
        self._startup_timeout = startup_timeout
        self._lock = threading.Lock()
        self._idle: deque[_Worker] = deque()
        self._waiting: deque[_Slot] = deque()
        self._all: set[_Worker] = set()
        self._started = False

    def call(self, func: str, args: list[Any], timeout: float) -> Any:
        """Run ``func(*args)`` in a worker; raise :class:`WorkerTimeout` after ``timeout`` seconds.

        ``func`` is ``"module:function"``; arguments and result travel as JSON. Waiting for a free
        worker, or for a replacement worker to start, is not counted in ``timeout``.
        """
        worker = self._acquire()
        try:
            worker.wait_ready(self._startup_timeout)
            result = worker.call(func, args, timeout)
        except CallFailed:
            raise
        except (WorkerTimeout, WorkerFailed, OSError, ValueError) as exc:
            worker = self._replace(worker)
            if isinstance(exc, (WorkerTimeout, WorkerFailed)):
                raise
            raise WorkerFailed(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self._release(worker)
        return result

    def close(self) -> None:
        """Stop every worker. Later calls (and callers waiting now) start fresh ones."""
        with self._lock:
            workers, self._all = list(self._all), set()
            waiting, self._waiting = list(self._waiting), deque()
            self._idle.clear()
            self._started = False
        for slot in waiting:
            slot.ready.set()  # no worker: the caller starts the pool again
        for worker in workers:
            worker.stop()

    def abandon(self) -> None:
        """In a forked child: close the inherited pipes to the parent's workers without touching them.

        Takes no lock (the fork may have copied it held); the pool is unusable afterwards.
        """
        workers, self._all = list(self._all), set()
        for worker in workers:
            for pipe in (worker.proc.stdin, worker.proc.stdout):
                with contextlib.suppress(OSError):
                    pipe.close()

    def _acquire(self) -> _Worker:
        while True:
            with self._lock:
                if not self._started:
                    for _ in range(self.size):
                        self._offer(self._spawn())
                    self._started = True
                if self._idle:
                    return self._idle.popleft()
                slot = _Slot()
                self._waiting.append(slot)
            slot.ready.wait()
            if slot.worker is not None:
                return slot.worker

    def _offer(self, worker: _Worker) -> None:
        """Hand ``worker`` to the longest-waiting caller, or park it (lock held)."""
        if self._waiting:
            slot = self._waiting.popleft()
            slot.worker = worker
            slot.ready.set()
        else:
            self._idle.append(worker)

    def _spawn(self) -> _Worker:
        worker = _Worker(self._init, self._max_memory_mb)
        self._all.add(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        """Kill ``worker`` and start its successor (unless the pool was closed meanwhile)."""
        worker.kill()
        with self._lock:
            if worker not in self._all:
                return worker
            self._all.discard(worker)
            return self._spawn()

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if worker in self._all:
                self._offer(worker)
                return
        worker.stop()  # belongs to a pool generation that close() already ended
