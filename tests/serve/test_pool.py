"""The server's side of its workers, on the event loop alone: replies settle their calls on the loop
(no thread of the pool's), writes past what the pipe takes are queued, a killed worker fails its
calls at once and is replaced, replies written just before a worker ends still answer, and the one
call-timeout timer of a worker kills it when it answers nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from serve_support import SLOW_ENV
from slow_env import worker_that_answers_once_and_exits

from vlm_envs.serve.pool import EnvWorkers, WorkerDied
from vlm_envs.serve.worker import WorkerSettings

SERVED = {"slow": SLOW_ENV}
RESET = {"env": "slow", "seed": 1, "config": {"turns": 1000}}


def with_pool(body: Callable[[EnvWorkers], Awaitable[Any]], **kwargs: Any) -> Any:
    """Run ``body(pool)`` on a fresh loop with a started pool of one worker, closed after."""

    async def main() -> Any:
        pool = EnvWorkers(1, SERVED, **kwargs)
        pool.start(asyncio.get_running_loop())
        assert await pool.wait_ready(120)
        try:
            return await body(pool)
        finally:
            await pool.close()

    return asyncio.run(main())


def test_replies_settle_on_the_loop_and_writes_past_the_pipe_are_queued():
    threads = threading.active_count()

    async def body(pool: EnvWorkers) -> None:
        assert threading.active_count() == threads  # no reader thread: the loop reads the pipe
        generation = pool.generation(0)
        assert (await pool.call(0, generation, "reset", "a", RESET)).status == 200
        bulky = "x" * 60_000  # 500 calls of 60 kB: far past the pipe's buffers
        answers = await asyncio.gather(*(pool.call(0, generation, "step", "a", bulky) for _ in range(500)))
        assert [a.status for a in answers] == [200] * 500
        for number, answer in enumerate(answers, 1):  # run in the order they were sent
            assert f'"text":"step {number}"'.encode() in answer.body

    with_pool(body)


def test_a_killed_worker_fails_its_calls_at_once_and_is_replaced():
    deaths: list[tuple[int, int, str]] = []

    async def body(pool: EnvWorkers) -> None:
        generation, pid = pool.generation(0), pool.pids()[0]
        assert (await pool.call(0, generation, "reset", "a", RESET)).status == 200
        calls = [asyncio.ensure_future(pool.call(0, generation, "step", "a", "sleep 60")) for _ in range(3)]
        await asyncio.sleep(0.5)
        started = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        for call in calls:
            with pytest.raises(WorkerDied, match="exit code -9"):
                await asyncio.wait_for(call, 30)
        assert time.monotonic() - started < 10
        assert deaths and deaths[0][:2] == (0, generation) and "exit code -9" in deaths[0][2]
        with pytest.raises(WorkerDied, match="restarted"):
            await pool.call(0, generation, "state", "a", None)
        assert pool.generation(0) != generation and await pool.wait_ready(120)
        fresh = await pool.call(0, pool.generation(0), "reset", "b", RESET)
        assert fresh.status == 200

    with_pool(body, on_death=lambda *death: deaths.append(death))


def test_a_reply_written_just_before_the_worker_ended_still_answers():
    async def body(pool: EnvWorkers) -> None:
        answer = await asyncio.wait_for(pool.call(0, pool.generation(0), "state", "a", None), 30)
        assert answer.body == b"last words"

    with_pool(body, target=worker_that_answers_once_and_exits)


def test_a_worker_silent_past_the_call_timeout_is_killed_by_its_one_timer():
    settings = WorkerSettings(call_deadline_s=0.3)

    async def body(pool: EnvWorkers) -> None:
        generation = pool.generation(0)
        assert (await pool.call(0, generation, "reset", "a", RESET)).status == 200
        started = time.monotonic()
        with pytest.raises(WorkerDied, match="answered nothing for 1 s"):  # the signal stays blocked
            await asyncio.wait_for(pool.call(0, generation, "step", "a", "block 60"), 30)
        assert 1.0 <= time.monotonic() - started < 10

    with_pool(body, call_timeout_s=1.0, settings=settings)
