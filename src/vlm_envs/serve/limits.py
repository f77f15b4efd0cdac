"""What bounds one call in a serve worker: a deadline (:class:`Watchdog`) and memory (:class:`MemoryBudget`).

A worker runs its sessions' calls one at a time on its main thread. The watchdog ends a call that runs
past its deadline: one thread of its own, for all calls, delivers :data:`DEADLINE_SIGNAL` to the main
thread, whose handler raises :class:`DeadlineExceeded` there. A real signal also ends a blocking system
call (opening a FIFO, ``time.sleep``, a socket read); only C code that never returns to the interpreter,
or that blocks the signal, runs on, and the server's call timeout kills the worker for that. ``SIGALRM``
and ``setitimer`` are left alone (the answer checker's processes use ``ITIMER_REAL``).

The memory budget caps the worker's address space (``RLIMIT_AS``): its size once its imports are done
plus the worker's budget, and during a call at most the session's budget above what was mapped when
the call began. An allocation past either raises ``MemoryError`` in that call, not the host's OOM
killer in some process. Linux only: elsewhere (no ``/proc/self/statm``) nothing is capped or measured.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import itertools
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

#: The signal that ends a call past its deadline.
DEADLINE_SIGNAL = signal.SIGUSR1
#: While a call goes on past its deadline (an env swallowed the exception), it is signalled again this often.
REPEAT_S = 1.0
#: Set in a worker process's environment unless already set: two malloc arenas and one BLAS thread keep
#: its address space (what the memory cap counts) near the memory it uses.
WORKER_ENVIRONMENT = {"MALLOC_ARENA_MAX": "2", "OPENBLAS_NUM_THREADS": "1"}
MIB = 1 << 20

_STATM = "/proc/self/statm"
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_environ_lock = threading.Lock()


class DeadlineExceeded(BaseException):
    """The call ran past its deadline (raised in the worker's main thread by :class:`Watchdog`). A
    ``BaseException``, so an env's ``except Exception`` does not swallow it."""


class Watchdog:
    """Ends a call that runs past its deadline. Create it on the main thread; arm it per call with
    :meth:`deadline`. A signal for a call that has ended raises nothing (each call has its own token).

    One thread watches every call, and a call does not wake it: the thread sleeps until the deadline
    of the call it last saw, or ``horizon_s`` when it saw none, so any later call whose deadline is at
    least ``horizon_s`` off is looked at in time. Only a call with a nearer deadline wakes it.
    """

    def __init__(self, horizon_s: float, repeat_s: float = REPEAT_S) -> None:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("a Watchdog is created on the main thread (signal handlers run there)")
        self._main = threading.get_ident()
        self._horizon_s = horizon_s
        self._repeat_s = repeat_s
        self._tokens = itertools.count(1)
        self._cond = threading.Condition()
        self._armed: tuple[int, float] | None = None  # (token, when to signal): guarded by _cond
        self._wake_at = 0.0  # when the watching thread looks next: guarded by _cond
        self._current: int | None = None  # the token of the call running now (read by the handler)
        self._fired: int | None = None  # the token of the call last signalled
        signal.signal(DEADLINE_SIGNAL, self._on_signal)
        threading.Thread(target=self._watch, daemon=True, name="vlm-envs-serve-watchdog").start()

    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Run the block under a deadline of ``seconds``: :class:`DeadlineExceeded` when it runs past
        it, also when the block swallowed the interruption and returned (its state is not to be
        trusted). Not reentrant."""
        token = next(self._tokens)
        with self._cond:
            self._current = token
            when = time.monotonic() + seconds
            self._armed = (token, when)
            if when < self._wake_at:  # the watching thread would look too late
                self._cond.notify()
        try:
            yield
        finally:
            self._current = None  # first: from here on a signal for this call raises nothing
            with self._cond:
                self._armed = None
        if self._fired == token:
            raise DeadlineExceeded

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._current is not None and self._current == self._fired:
            raise DeadlineExceeded

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                if self._armed is not None and self._armed[1] <= now:
                    token = self._armed[0]
                    self._fired = token
                    self._armed = (token, now + self._repeat_s)
                    signal.pthread_kill(self._main, DEADLINE_SIGNAL)
                    continue
                self._wake_at = now + self._horizon_s if self._armed is None else self._armed[1]
                self._cond.wait(self._wake_at - now)


class MemoryBudget:
    """A worker's memory: its address space capped at its size now plus ``worker_mib``, and each call at
    ``session_mib`` above what was mapped when it began. Create it once the worker's imports are done."""

    def __init__(self, session_mib: int, worker_mib: int) -> None:
        self.session_bytes = session_mib * MIB
        self.worker_bytes = worker_mib * MIB
        self.enforced = os.path.exists(_STATM)
        self.base_rss = self.rss()
        _, self._hard = resource.getrlimit(resource.RLIMIT_AS)
        self._cap = self._limit(_mapped() + self.worker_bytes)
        self._set(self._cap)

    def rss(self) -> int:
        """The worker's resident memory now, in bytes (0 where it cannot be read)."""
        return _statm()[1]

    def used(self) -> int:
        """The resident memory the worker holds beyond what it held once started, in bytes."""
        return max(0, self.rss() - self.base_rss)

    def room_for_session(self) -> bool:
        """Whether a new session's budget still fits in the worker's."""
        return not self.enforced or self.used() + self.session_bytes <= self.worker_bytes

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Run the block with the address space capped at the session's budget above what is mapped now."""
        self._set(min(self._cap, self._limit(_mapped() + self.session_bytes)))
        try:
            yield
        finally:
            self._set(self._cap)

    @staticmethod
    def release() -> None:
        """Hand freed memory back to the system: collect cycles, then trim malloc's free pages (glibc)."""
        gc.collect()
        trim = getattr(_libc(), "malloc_trim", None)
        if trim is not None:
            trim(0)

    def _limit(self, size: int) -> int:
        return size if self._hard == resource.RLIM_INFINITY else min(size, self._hard)

    def _set(self, soft: int) -> None:
        if self.enforced:
            resource.setrlimit(resource.RLIMIT_AS, (soft, self._hard))


@contextlib.contextmanager
def worker_environment() -> Iterator[None]:
    """``os.environ`` with :data:`WORKER_ENVIRONMENT`'s defaults while a worker process starts (it
    inherits them at its start, before numpy or malloc read them), as it was afterwards."""
    with _environ_lock:
        added = {key: value for key, value in WORKER_ENVIRONMENT.items() if key not in os.environ}
        os.environ.update(added)
        try:
            yield
        finally:
            for key in added:
                os.environ.pop(key, None)


def _statm() -> tuple[int, int]:
    """(address space, resident memory) of this process in bytes; zeros where ``/proc`` is absent."""
    try:
        size, resident = os.pread(_statm_fd(os.getpid()), 256, 0).split()[:2]
    except OSError:
        return 0, 0
    return int(size) * _PAGE, int(resident) * _PAGE


@functools.cache
def _statm_fd(pid: int) -> int:
    """``/proc/self/statm`` kept open (read again from offset 0, it answers anew: a tenth of reopening)."""
    return os.open(_STATM, os.O_RDONLY)


def _mapped() -> int:
    return _statm()[0]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None
