"""Least-loaded dispatch with a bound on episodes in flight, shared by the worker and Ray pools."""

import asyncio
import threading

import pytest

from vlm_envs.rollout.executors.slots import Slots


def test_slots_go_to_the_least_loaded_member():
    slots = Slots(3)

    async def main():
        return [await slots.take() for _ in range(7)]

    assert asyncio.run(main()) == [0, 1, 2, 0, 1, 2, 0] and slots.load == [3, 2, 2]
    slots.give_back(1)
    slots.give_back(1)
    assert asyncio.run(main())[:2] == [1, 1]  # the emptiest member first


def test_callers_beyond_the_bound_wait_until_a_slot_is_given_back():
    slots = Slots(2, limit=1)
    taken: list[int] = []

    async def one(name: int) -> None:
        index = await slots.take()
        taken.append(name)
        await asyncio.sleep(0.01)
        assert max(slots.load) <= 1  # never more than the bound on one member
        slots.give_back(index)

    async def main():
        await asyncio.gather(*(one(name) for name in range(6)))

    asyncio.run(main())
    assert sorted(taken) == list(range(6)) and slots.load == [0, 0]


def test_a_slot_given_back_from_another_thread_wakes_a_waiting_caller():
    slots = Slots(1, limit=1)

    async def main():
        first = await slots.take()
        waiting = asyncio.ensure_future(slots.take())
        await asyncio.sleep(0.05)
        assert not waiting.done()  # full: it waits
        threading.Thread(target=slots.give_back, args=(first,)).start()
        return await asyncio.wait_for(waiting, timeout=5)

    assert asyncio.run(main()) == 0 and slots.load == [1]


def test_a_cancelled_waiter_does_not_swallow_the_slot():
    slots = Slots(1, limit=1)

    async def main():
        first = await slots.take()
        gone = asyncio.ensure_future(slots.take())
        kept = asyncio.ensure_future(slots.take())
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.sleep(0.01)
        slots.give_back(first)  # goes to the waiter still there, not to the cancelled one
        return await asyncio.wait_for(kept, timeout=5)

    assert asyncio.run(main()) == 0


def test_the_bound_must_be_positive():
    with pytest.raises(ValueError, match=">= 1"):
        Slots(2, limit=0)
