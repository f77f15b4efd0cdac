"""What tests/serve/test_limits.py runs in a process of its own (importable by a spawned process)."""

from __future__ import annotations

import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from vlm_envs.serve.limits import DeadlineExceeded, Watchdog

CALLS = 2000


def switches(native_id: int) -> int:
    """The thread's voluntary context switches: one per time it slept and was woken."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("voluntary_ctxt")).split()[1])


def watch(conn: Connection) -> None:
    """Time calls under one :class:`Watchdog`; send back how often the watch woke and when it ended calls."""
    dog = Watchdog(horizon_s=5.0)
    (thread,) = [t for t in threading.enumerate() if t.name == "vlm-envs-serve-watchdog"]
    time.sleep(0.2)  # the thread is asleep now
    before = switches(thread.native_id)
    for _ in range(CALLS):
        with dog.deadline(5.0):
            pass
        time.sleep(0.0002)  # between calls a worker waits on its pipe, letting other threads run
    quiet = switches(thread.native_id) - before
    ended = []
    for seconds in (0.3, 5.0):  # nearer than the horizon (it wakes the thread), and at the horizon
        started = time.monotonic()
        try:
            with dog.deadline(seconds):
                time.sleep(seconds + 30)
        except DeadlineExceeded:
            ended.append(time.monotonic() - started)
    conn.send((quiet, ended))
