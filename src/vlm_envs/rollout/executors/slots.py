"""Least-loaded dispatch over a pool's members, with an optional bound on episodes in flight each.

Both pools (:class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`,
:class:`~vlm_envs.rollout.executors.ray_workers.RayEpisodeWorkers`) count their episodes per member here. A
caller :meth:`Slots.take` s the least loaded member's slot, waiting on its own event loop while
every member is full, and gives it back from any thread; each slot given back wakes one waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque


class Slots:
    """``members`` counters of episodes in flight, each at most ``limit`` (``None``: unbounded)."""

    def __init__(self, members: int, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"the bound on episodes in flight must be >= 1, got {limit}")
        self.limit = limit
        self.load = [0] * members
        self._lock = threading.Lock()
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def take(self) -> int:
        """The index of the least loaded member with a free slot, now counted as taken."""
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                index = min(range(len(self.load)), key=self.load.__getitem__)
                if self.limit is None or self.load[index] < self.limit:
                    self.load[index] += 1
                    return index
                slot = loop.create_future()
                self._waiting.append((loop, slot))
            await slot

    def give_back(self, index: int) -> None:
        """Free a slot of member ``index`` (from any thread) and wake one caller waiting for one."""
        with self._lock:
            self.load[index] -= 1
            while self._waiting:
                loop, slot = self._waiting.popleft()
                if slot.done():  # its caller was cancelled
                    continue
                with contextlib.suppress(RuntimeError):  # the waiter's loop is closed: nobody waits
                    loop.call_soon_threadsafe(_wake, slot)
                    return


def _wake(slot: asyncio.Future[None]) -> None:
    if not slot.done():
        slot.set_result(None)
