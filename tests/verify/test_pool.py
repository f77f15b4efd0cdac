"""The worker pool on its own: limits, replacement, failures, closing, never a reply to another call."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from vlm_envs.verify.pool import (
    MAX_TIMEOUT,
    CallFailed,
    WorkerFailed,
    WorkerPool,
    WorkerTimeout,
    _Channel,
    _Worker,
)


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


def test_an_infinite_timeout_is_refused_and_leaves_no_reply_for_the_next_call(pool: WorkerPool) -> None:
    """Issue #33: ``timeout=inf`` raised OverflowError after the request was sent; the worker went back
    to the pool with the reply unread, and every later call got the previous call's result."""
    for bad in (float("inf"), 1e19, float("nan"), 0, -1.0, True, "1", MAX_TIMEOUT + 1):
        with pytest.raises(ValueError, match="seconds"):
            pool.call("builtins:len", ["abc"], timeout=bad)  # type: ignore[arg-type]
    assert pool.call("builtins:len", ["abcdef"], timeout=30) == 6
    assert pool.call("builtins:len", ["ab"], timeout=30) == 2


class _Interrupted(Exception):
    pass


def test_a_call_cut_short_after_sending_never_answers_the_next_one(
    pool: WorkerPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever stops a call between its request and its reply, that worker is killed, not reused."""
    first = pool.call("os:getpid", [], timeout=30)
    read_line = _Channel.read_line

    def interrupted(self: _Channel, deadline: float) -> bytes:
        monkeypatch.setattr(_Channel, "read_line", read_line)
        raise _Interrupted

    monkeypatch.setattr(_Channel, "read_line", interrupted)
    with pytest.raises(_Interrupted):
        pool.call("builtins:len", ["abc"], timeout=30)
    assert pool.call("builtins:len", ["abcdef"], timeout=30) == 6
    assert pool.call("os:getpid", [], timeout=30) != first


def test_a_reply_to_another_call_is_refused() -> None:
    """Replies carry the id of their request; a worker answering another is out of step and fails."""
    ours, theirs = socket.socketpair()
    worker = _Worker(ours, pid=-1, generation=0)

    def answer_the_wrong_call() -> None:
        theirs.makefile("rb").readline()
        theirs.sendall(b'{"id": 6, "ok": 3}\n')

    thread = threading.Thread(target=answer_the_wrong_call)
    thread.start()
    with pytest.raises(WorkerFailed, match="out of step"):
        worker.call(7, "builtins:len", ["abcdef"], time.monotonic() + 30)
    thread.join()
    ours.close()
    theirs.close()


def test_a_slow_call_does_not_hold_up_the_calls_behind_it() -> None:
    """A caller that finds every worker busy gets one forked for it (was: it queued behind them)."""
    pool = WorkerPool(1, max_size=4)
    try:
        pool.call("os:getpid", [], timeout=30)
        slow = [threading.Thread(target=pool.call, args=("time:sleep", [3], 10)) for _ in range(3)]
        for thread in slow:
            thread.start()
        time.sleep(0.3)
        start = time.monotonic()
        assert pool.call("builtins:len", ["abc"], timeout=30) == 3
        assert time.monotonic() - start < 1.5  # about 0.06 s: 50 ms of waiting, then a fork
        for thread in slow:
            thread.join()
    finally:
        pool.close()


def test_past_max_size_a_waiting_call_times_out_at_its_own_deadline() -> None:
    """The wait for a worker counts from the call: it does not last until a busy worker frees up."""
    pool = WorkerPool(1, max_size=1)
    try:
        pool.call("os:getpid", [], timeout=30)
        busy = threading.Thread(target=pool.call, args=("time:sleep", [3], 10))
        busy.start()
        time.sleep(0.3)
        start = time.monotonic()
        with pytest.raises(WorkerTimeout):
            pool.call("builtins:len", ["abc"], timeout=0.4)
        assert time.monotonic() - start < 1.5  # 0.4 s, not the 2.7 s the busy worker has left
        busy.join()
        assert pool.call("builtins:len", ["abc"], timeout=30) == 3
    finally:
        pool.close()


def test_a_burst_retires_workers_beyond_size() -> None:
    pool = WorkerPool(1, max_size=4)
    try:
        threads = [threading.Thread(target=pool.call, args=("time:sleep", [0.5], 10)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(pool._idle) == 1 and len(pool._all) == 1
    finally:
        pool.close()
