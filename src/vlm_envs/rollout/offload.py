"""Where an episode's CPU work runs: on a few shared threads off the event loop, or inline.

Env steps, processor calls and payload encoding hold the GIL most of the time. A trainer's event
loop hands them to :func:`rollout_executor` so that it stays responsive; a process whose loop serves
only episodes (an episode worker) runs them :data:`INLINE`, where a thread hop costs more than it gives.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
#: Threads of the shared rollout executor. Few on purpose: the work holds the GIL most of the time,
#: and every extra runnable thread delays the event loop's turn at it.
ROLLOUT_THREADS = 2
_shared: ThreadPoolExecutor | None = None
_shared_lock = threading.Lock()


def rollout_executor() -> ThreadPoolExecutor:
    """The process-wide executor for env steps, processor calls and payload encoding."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = ThreadPoolExecutor(max_workers=ROLLOUT_THREADS, thread_name_prefix="vlm-envs-rollout")
        return _shared


class InlineExecutor(Executor):
    """Runs the CPU work on the event loop's own thread, with no handoff.

    For processes whose loop serves only episodes (the workers of
    :class:`~vlm_envs.rollout.executors.workers.EpisodeWorkers`), where a thread hop costs more than it gives.
    """

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:  # handed to the caller through the future, as an executor does
            future.set_exception(err)
        return future


#: Runs env steps and encoding inline (see :class:`InlineExecutor`).
INLINE = InlineExecutor()
