"""Grading under a hard wall-clock limit: a lazily started, module-level pool of worker processes.

Safe from any thread and from asyncio at once; survives the host forking (a child starts its own
pool); the workers stop when the interpreter exits.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from vlm_envs.verify.normalize import MAX_TEXT_CHARS
from vlm_envs.verify.pool import WorkerFailed, WorkerPool, WorkerTimeout
from vlm_envs.verify.verdict import TIMEOUT, TOO_LONG, UNPARSEABLE, WORKER_ERROR, Verdict

#: Wall-clock limit of one grading call, in seconds.
DEFAULT_TIMEOUT = 3.0
#: Address-space cap of each worker (POSIX); a warmed-up worker maps about 0.25 GiB.
DEFAULT_MAX_MEMORY_MB = 2048
_GRADE = "vlm_envs.verify.compare:grade_local_dict"
_WARM_UP = "vlm_envs.verify.compare:warm_up"

_lock = threading.Lock()
_pool: WorkerPool | None = None
_executor: ThreadPoolExecutor | None = None
_settings = {
    "workers": int(os.environ.get("VLM_ENVS_VERIFY_WORKERS", "0")) or max(1, min(4, os.cpu_count() or 1)),
    "timeout": float(os.environ.get("VLM_ENVS_VERIFY_TIMEOUT", DEFAULT_TIMEOUT)),
    "max_memory_mb": DEFAULT_MAX_MEMORY_MB,
}


def configure(
    *, workers: int | None = None, timeout: float | None = None, max_memory_mb: int | None = None
) -> None:
    """Set the pool size (>= 1), the default time limit and the per-worker memory cap.

    Also read from ``VLM_ENVS_VERIFY_WORKERS`` / ``VLM_ENVS_VERIFY_TIMEOUT`` at import. A new size or
    memory cap stops a running pool, so the next call starts one with the new settings.
    """
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
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

    Never raises on model text: an overrun gives reason "timeout" (the worker is killed and
    replaced), a dead worker "worker error". Waiting for a free worker is not counted in the limit.
    """
    if not isinstance(prediction, str) or not isinstance(ground_truth, str):
        return Verdict(False, UNPARSEABLE)
    if len(prediction) > MAX_TEXT_CHARS:
        return Verdict(False, TOO_LONG)
    limit = _settings["timeout"] if timeout is None else timeout
    try:
        return Verdict.from_dict(_get_pool().call(_GRADE, [prediction, ground_truth], limit))
    except WorkerTimeout:
        return Verdict(False, TIMEOUT)
    except (WorkerFailed, ValueError):
        return Verdict(False, WORKER_ERROR)


async def agrade(prediction: str, ground_truth: str, *, timeout: float | None = None) -> Verdict:
    """:func:`grade` for asyncio: waits on a worker without blocking the event loop."""
    loop = asyncio.get_running_loop()
    call = functools.partial(grade, prediction, ground_truth, timeout=timeout)
    return await loop.run_in_executor(_get_executor(), call)


def _get_pool() -> WorkerPool:
    global _pool
    with _lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = WorkerPool(_settings["workers"], init=_WARM_UP, max_memory_mb=_settings["max_memory_mb"])
        return _pool


def _get_executor() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(_settings["workers"], thread_name_prefix="vlm-envs-verify")
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
