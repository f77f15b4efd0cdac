"""Grading under a hard wall-clock limit: a lazily started, module-level pool of worker processes.

Answers that need no parser (too long, empty, hedged, a bare letter, words, two plain decimal numbers:
:mod:`vlm_envs.verify.quick`) are graded in the caller at once; the others go to a worker. Safe from
any thread and from asyncio at once; survives the host forking (a child starts its own pool); the
workers stop when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from vlm_envs.verify.normalize import MAX_TEXT_CHARS
from vlm_envs.verify.pool import WorkerFailed, WorkerPool, WorkerTimeout, check_timeout
from vlm_envs.verify.quick import normalized, quick_verdict
from vlm_envs.verify.verdict import TIMEOUT, TOO_LONG, UNPARSEABLE, WORKER_ERROR, Verdict

#: Wall-clock limit of one grading call, in seconds, counted from the call (a geometry answer takes
#: 0.2-6 ms, the slowest seen 75 ms on a loaded machine).
DEFAULT_TIMEOUT = 0.5
#: Address-space cap of each worker (POSIX); a warmed-up worker maps about 0.25 GiB.
DEFAULT_MAX_MEMORY_MB = 2048
_GRADE = "vlm_envs.verify.compare:grade_local_dict"
_WARM_UP = "vlm_envs.verify.compare:warm_up"

_lock = threading.Lock()
_pool: WorkerPool | None = None
_executor: ThreadPoolExecutor | None = None
_settings = {
    "workers": int(os.environ.get("VLM_ENVS_VERIFY_WORKERS", "0")) or max(1, min(4, os.cpu_count() or 1)),
    "timeout": check_timeout(
        float(os.environ.get("VLM_ENVS_VERIFY_TIMEOUT", DEFAULT_TIMEOUT)), "VLM_ENVS_VERIFY_TIMEOUT"
    ),
    "max_memory_mb": DEFAULT_MAX_MEMORY_MB,
}


def configure(
    *, workers: int | None = None, timeout: float | None = None, max_memory_mb: int | None = None
) -> None:
    """Set the pool size (>= 1: workers kept between calls; it forks up to ``max(16, 4 * workers)`` for
    calls at once), the default time limit (seconds, at most ``MAX_TIMEOUT``) and the per-process memory
    cap.

    Also read from ``VLM_ENVS_VERIFY_WORKERS`` / ``VLM_ENVS_VERIFY_TIMEOUT`` at import. A new size or
    memory cap stops a running pool, so the next call starts one with the new settings.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if timeout is not None:
        timeout = check_timeout(timeout)
    updates = {"workers": workers, "timeout": timeout, "max_memory_mb": max_memory_mb}
    with _lock:
        changed = {k: v for k, v in updates.items() if v is not None and _settings[k] != v}
        _settings.update(changed)
    if changed.keys() & {"workers", "max_memory_mb"}:
        shutdown()


def shutdown() -> None:
    """Stop the worker processes now (they restart on the next call). Runs at interpreter exit."""
    global _pool, _executor
    with _lock:
        pool, executor, _pool, _executor = _pool, _executor, None, None
    if pool is not None and pool.pid == os.getpid():
        pool.close()
    if executor is not None:
        executor.shutdown(wait=False)


def grade(prediction: str, ground_truth: str, *, timeout: float | None = None) -> Verdict:
    """Grade ``prediction`` against ``ground_truth`` in a worker process, within ``timeout`` seconds.

    Never raises on model text: an overrun gives reason "timeout" (the worker is killed and replaced),
    a dead worker "worker error". The limit bounds the grading itself and, counted from this call, the
    wait for a worker (one is forked for a call that waited 50 ms); only the one-off start of the pool
    in a fresh process is not counted. Answers that need no parser are graded here at once.
    ``ValueError`` if ``timeout`` is not a number of seconds in ``(0, MAX_TIMEOUT]``.
    """
    return _grade(prediction, ground_truth, timeout, time.monotonic())


async def agrade(prediction: str, ground_truth: str, *, timeout: float | None = None) -> Verdict:
    """:func:`grade` for asyncio: waits on a worker without blocking the event loop (the wait for a
    worker counts from this call, waiting for a thread included)."""
    submitted = time.monotonic()
    limit = _limit(timeout)
    loop = asyncio.get_running_loop()
    call = functools.partial(_grade, prediction, ground_truth, limit, submitted)
    return await loop.run_in_executor(_get_executor(), call)


def _limit(timeout: float | None) -> float:
    return _settings["timeout"] if timeout is None else check_timeout(timeout)


def _grade(prediction: str, ground_truth: str, timeout: float | None, submitted: float) -> Verdict:
    limit = _limit(timeout)
    if not isinstance(prediction, str) or not isinstance(ground_truth, str):
        return Verdict(False, UNPARSEABLE)
    if len(prediction) > MAX_TEXT_CHARS:
        return Verdict(False, TOO_LONG)
    try:
        quick = quick_verdict(*normalized(prediction, ground_truth))
    except Exception:  # a bug in the string work: the same verdict a worker failing on it gives
        return Verdict(False, WORKER_ERROR)
    if quick is not None:
        return quick
    try:
        reply = _get_pool().call(_GRADE, [prediction, ground_truth], limit, submitted=submitted)
        return Verdict.from_dict(reply)
    except WorkerTimeout:
        return Verdict(False, TIMEOUT)
    except (WorkerFailed, ValueError):
        return Verdict(False, WORKER_ERROR)


def _max_workers() -> int:
    """Workers the pool forks for calls at once (it keeps ``workers`` of them between calls)."""
    return max(16, 4 * _settings["workers"])


def _get_pool() -> WorkerPool:
    global _pool
    with _lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = WorkerPool(
                _settings["workers"],
                max_size=_max_workers(),
                init=_WARM_UP,
                max_memory_mb=_settings["max_memory_mb"],
            )
        return _pool


def _get_executor() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            # as many threads as the pool has workers at most: a call never waits for a thread while a
            # worker could take it
            _executor = ThreadPoolExecutor(_max_workers(), thread_name_prefix="vlm-envs-verify")
        return _executor


def _forget_in_child() -> None:
    """After fork the parent's workers and threads are not ours: start afresh, touch nothing."""
    global _lock, _pool, _executor
    _lock = threading.Lock()
    if _pool is not None:
        _pool.abandon()
    _pool = None
    _executor = None


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(shutdown)
