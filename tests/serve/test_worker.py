"""A worker hands a closed session's memory back at once only when that session held much (a full
collection and malloc_trim cost tens of ms in a worker of many sessions); otherwise when a new session
would not fit without it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from serve_support import SLOW_ENV

from vlm_envs.serve.limits import MIB
from vlm_envs.serve.worker import RELEASE_MIB, Worker, WorkerSettings

RESET = {"env": "slow", "seed": 1, "config": {}}


class Budget:
    """A memory budget that counts its releases; the worker is full until ``room_after`` of them."""

    session_bytes = 64 * MIB

    def __init__(self, room_after: int = 0) -> None:
        self.releases = 0
        self.room_after = room_after

    def rss(self) -> int:
        return 0

    def used(self) -> int:
        return 0

    def room_for_session(self) -> bool:
        return self.releases >= self.room_after

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        yield

    def release(self) -> None:
        self.releases += 1


class Watchdog:
    @contextlib.contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        yield


def worker(budget: Budget) -> Worker:
    return Worker({"slow": SLOW_ENV}, WorkerSettings(), Watchdog(), budget)  # type: ignore[arg-type]


def test_a_small_session_closes_without_a_release_and_a_big_one_with_one():
    budget = Budget()
    serving = worker(budget)
    for name in ("small", "big"):
        assert serving.handle("reset", name, RESET).status == 200
    serving.sessions["big"].held = RELEASE_MIB * MIB
    assert serving.handle("close", "small", None).status == 200
    assert budget.releases == 0
    assert serving.handle("close", "big", None).status == 200
    assert budget.releases == 1


def test_a_new_session_without_room_first_gets_the_memory_not_handed_back_yet():
    budget = Budget(room_after=1)
    serving = worker(budget)
    assert serving.handle("reset", "a", RESET).status == 200
    assert budget.releases == 1
    full = Budget(room_after=2)
    answer = worker(full).handle("reset", "b", RESET)
    assert answer.status == 503 and full.releases == 1
