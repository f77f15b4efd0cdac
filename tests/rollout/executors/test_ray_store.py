"""Ray's object store against a rollout batch: replies cut at 32 MB of tensors (always one episode),
and one warning, rate limited, naming the store size a batch needs when the store is smaller than
that or spilled. The probes of a real cluster are checked in tests/on_ray/test_ray_store_cluster.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray")

from vlm_envs.rollout.executors.ray_actor import BATCH_BYTES, cut_batch
from vlm_envs.rollout.executors.ray_store import CHECK_EVERY_S, HEADROOM, MB, WARN_EVERY_S, StoreWatch


def episode(job_id: int, megabytes: float):
    return (job_id, b"pickle", [np.zeros(int(megabytes * MB), dtype=np.uint8)])


def test_a_reply_holds_at_most_32_mb_of_tensors_and_always_one_episode() -> None:
    finished = [episode(i, 5.4) for i in range(32)]  # about 175 MB: one reply of the issue
    replies = []
    while finished:
        reply, finished = cut_batch(finished, BATCH_BYTES)
        replies.append(reply)
    assert [len(r) for r in replies] == [5, 5, 5, 5, 5, 5, 2]
    assert [job for r in replies for job, _, _ in r] == list(range(32))  # in order, none lost
    big, rest = cut_batch([episode(0, 40), episode(1, 1)], BATCH_BYTES)
    assert [j for j, _, _ in big] == [0] and [j for j, _, _ in rest] == [1]  # one too large still goes


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def watch(capacity: int | None, spilled: list[int]) -> tuple[StoreWatch, Clock, list[str]]:
    clock, said = Clock(), []
    store = StoreWatch(lambda: capacity, lambda: spilled[0], clock, said.append)
    return store, clock, said


def test_a_store_smaller_than_the_batch_is_said_once_with_the_size_needed() -> None:
    store, clock, said = watch(500 * MB, [0])
    store.baseline()
    store.in_flight(2000)
    store.received([int(5.4 * MB)] * 10)  # 2,000 x 5.4 MB: about 10.8 GB
    assert len(said) == 1
    needed = int(2000 * int(5.4 * MB) * HEADROOM)
    assert store.needed() == needed
    assert f"({500:,} MB on the cluster) is too small" in said[0]
    assert f"--object-store-memory of at least {needed / MB:,.0f} MB" in said[0]
    assert "5.4 MB each" in said[0] and "2000 in flight" in said[0]
    clock.now += CHECK_EVERY_S
    store.received([int(5.4 * MB)])
    assert len(said) == 1  # rate limited
    clock.now += WARN_EVERY_S
    store.received([int(5.4 * MB)])
    assert len(said) == 2


def test_a_store_that_holds_the_batch_is_silent_until_it_spills() -> None:
    spilled = [100 * MB]  # spilled before this pool: not its doing
    store, clock, said = watch(16_000 * MB, spilled)
    store.baseline()
    store.in_flight(64)
    store.received([int(5.4 * MB)] * 64)
    assert said == []
    spilled[0] += 14_661 * MB
    clock.now += CHECK_EVERY_S
    store.received([int(5.4 * MB)])
    assert len(said) == 1 and f"spilled {14_661:,} MB to disk" in said[0]  # this pool's share only
    assert f"at least {16_000 + 14_661 * HEADROOM:,.0f} MB" in said[0]  # it held more than it has


def test_an_episode_larger_than_the_store_is_said_at_once() -> None:
    store, _, said = watch(200 * MB, [0])
    store.in_flight(1)
    store.received([300 * MB])
    assert len(said) == 1 and "largest 300.0 MB" in said[0]


def test_unknown_probes_say_nothing() -> None:
    store = StoreWatch(lambda: None, lambda: None, Clock(), pytest.fail)
    store.in_flight(10)
    store.received([MB])
    assert store.check() is None
