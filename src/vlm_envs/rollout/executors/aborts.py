"""Carrying a trainer's abort flag to episodes that run elsewhere (worker processes, Ray actors).

slime's flag is a plain attribute, so there is no future to wait on: one task per event loop polls
every watched episode's flag, each distinct flag once per tick, and sends the abort once.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

#: How often the callers' abort flags are polled while their episodes run elsewhere (seconds).
ABORT_POLL_S = 0.05


class AbortWatch:
    """Polls the abort flags of running episodes; ``send(target, job_id)`` aborts one."""

    def __init__(self, send: Callable[[Any, int], None], interval: float = ABORT_POLL_S) -> None:
        self.send = send
        self.interval = interval
        self._watched: dict[int, tuple[Any, Callable[[], bool]]] = {}
        self._tasks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = (
            weakref.WeakKeyDictionary()
        )

    def watch(self, job_id: int, target: Any, should_abort: Callable[[], bool] | None) -> None:
        """Poll ``should_abort`` (if any) while ``job_id`` runs on ``target``; call from its loop."""
        if should_abort is None:
            return
        self._watched[job_id] = (target, should_abort)
        loop = asyncio.get_running_loop()
        task = self._tasks.get(loop)
        if task is None or task.done():
            self._tasks[loop] = loop.create_task(self._poll())

    def forget(self, job_id: int) -> None:
        """``job_id`` has ended."""
        self._watched.pop(job_id, None)

    async def _poll(self) -> None:
        while self._watched:
            await asyncio.sleep(self.interval)
            flags: dict[int, bool] = {}
            for job_id, (target, should_abort) in list(self._watched.items()):
                key = id(should_abort)
                if key not in flags:
                    try:
                        flags[key] = bool(should_abort())
                    except Exception:  # a broken flag does not abort anything
                        flags[key] = False
                if flags[key]:
                    self.send(target, job_id)
                    self._watched.pop(job_id, None)
