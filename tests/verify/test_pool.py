"""The worker pool on its own: limits, replacement, failures, closing."""

from __future__ import annotations

import time

import pytest

from vlm_envs.verify.pool import CallFailed, WorkerFailed, WorkerPool, WorkerTimeout


@pytest.fixture
def pool():
    pool = WorkerPool(1)
    yield pool
    pool.close()


def test_overrun_kills_and_replaces_the_worker(pool: WorkerPool) -> None:
    first = pool.call("os:getpid", [], timeout=30)
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        pool.call("time:sleep", [30], timeout=0.3)
    assert time.monotonic() - start < 5
    second = pool.call("os:getpid", [], timeout=30)
    assert second != first


def test_a_raising_call_keeps_its_worker(pool: WorkerPool) -> None:
    first = pool.call("os:getpid", [], timeout=30)
    with pytest.raises(CallFailed, match="ValueError"):
        pool.call("math:sqrt", [-1], timeout=30)
    assert pool.call("os:getpid", [], timeout=30) == first


def test_a_dead_worker_is_replaced(pool: WorkerPool) -> None:
    first = pool.call("os:getpid", [], timeout=30)
    with pytest.raises(WorkerFailed, match="worker exited") as failure:
        pool.call("os:_exit", [3], timeout=30)
    assert not isinstance(failure.value, CallFailed)
    assert pool.call("os:getpid", [], timeout=30) != first


def test_close_then_use_again(pool: WorkerPool) -> None:
    first = pool.call("os:getpid", [], timeout=30)
    pool.close()
    assert pool.call("os:getpid", [], timeout=30) != first


def test_memory_cap_turns_a_blowup_into_a_failed_call() -> None:
    pool = WorkerPool(1, max_memory_mb=1024)
    try:
        with pytest.raises(CallFailed, match="MemoryError"):
            pool.call("builtins:bytearray", [4 * 1024**3], timeout=30)
        assert pool.call("builtins:len", ["abc"], timeout=30) == 3
    finally:
        pool.close()


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        WorkerPool(0)
