"""A caller's event loop waiting for a trajectory that a pool's thread hands over.

The pools (:class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`,
:class:`~vlm_envs.rollout.executors.ray_workers.RayEpisodeWorkers`) read finished episodes on threads of
their own. A thread settles the caller's :class:`Waiter` with a one-item list that the caller
empties, so the thread, which may hold the waiter (and so its future's result) a while, never holds
the trajectory's last reference: the caller, who drops it last, frees it (megabytes of tensors).
"""

from __future__ import annotations

import asyncio
import contextlib

from vlm_envs.rollout.trajectory import Trajectory


class Waiter:
    """One caller waiting on its running loop; ``failure_reward`` is the reward of :meth:`fail`."""

    __slots__ = ("failure_reward", "future", "loop")

    def __init__(self, failure_reward: float = 0.0) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[list[Trajectory]] = self.loop.create_future()
        self.failure_reward = failure_reward

    def hand_over(self, box: list[Trajectory]) -> None:
        """Settle with ``box`` (one trajectory), from any thread; the caller takes it out."""

        def settle() -> None:
            if not self.future.done():
                self.future.set_result(box)

        with contextlib.suppress(RuntimeError):  # the caller's loop is closed: nobody is waiting
            self.loop.call_soon_threadsafe(settle)

    def fail(self, error: str) -> None:
        """Settle with a FAILED trajectory saying ``error``."""
        self.hand_over([Trajectory.failed(error, self.failure_reward)])

    async def trajectory(self) -> Trajectory:
        """The trajectory handed over (on the caller's loop)."""
        return (await self.future).pop()
