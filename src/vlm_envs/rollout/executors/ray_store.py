"""Whether Ray's object store can hold a rollout batch, said once in a while when it cannot.

Episodes played on Ray actors come back through the object store and their tensors are read in
place, so a batch's episodes hold store memory until the trainer drops them. A store smaller than
that spills to disk: 15 actors playing 2,000 8-turn Sokoban vision episodes on 16 cores ran 386
turns/s with a 500 MB store (14.6 GB spilled) and 4,450 turns/s with a 16 GB one, and nothing said
why. :class:`StoreWatch` counts each episode's bytes and the episodes in flight, and warns (at most
once per :data:`WARN_EVERY_S`) when the store spilled or is smaller than the batch needs, naming the
size to start Ray with. Importing this module imports ray.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence

import ray

logger = logging.getLogger(__name__)

#: The least time between two warnings (seconds).
WARN_EVERY_S = 600.0
#: The least time between two looks at the store's spill counter (it asks a raylet; seconds).
CHECK_EVERY_S = 10.0
#: The store size to ask for, per byte the batch holds: room for Ray's own objects and a batch
#: that overlaps the next one.
HEADROOM = 1.5
MB = 1 << 20


def store_capacity() -> int | None:
    """The object store bytes of the cluster's alive nodes, all together (``None``: unknown)."""
    try:
        return int(ray.cluster_resources().get("object_store_memory", 0)) or None
    except Exception:  # the cluster is going away: nothing to say about it
        return None


def spilled_bytes() -> int | None:
    """The bytes the cluster's object stores spilled to disk so far (``None``: unknown). Ray has no
    public call for it: this asks a raylet as ``ray memory --stats-only`` does."""
    try:
        from ray._private.internal_api import get_memory_info_reply, get_state_from_address

        state = get_state_from_address(ray.get_runtime_context().gcs_address)
        return int(get_memory_info_reply(state, timeout_seconds=10.0).store_stats.spilled_bytes_total)
    except Exception:  # a Ray without it, or a cluster going away
        return None


class StoreWatch:
    """Episode bytes and episodes in flight of one pool, checked against the store (thread-safe).

    ``capacity``, ``spilled`` and ``clock`` are the probes (Ray's, by default); ``warn`` says it.
    """

    def __init__(
        self,
        capacity: Callable[[], int | None] = store_capacity,
        spilled: Callable[[], int | None] = spilled_bytes,
        clock: Callable[[], float] = time.monotonic,
        warn: Callable[[str], None] = logger.warning,
    ) -> None:
        self._capacity, self._spilled, self._clock, self._warn = capacity, spilled, clock, warn
        self._lock = threading.Lock()
        self.episodes = 0
        self.bytes = 0
        self.largest = 0
        self.peak_in_flight = 0
        self._spilled_before: int | None = None
        self._checked = -math.inf
        self._warned = -math.inf

    def baseline(self) -> None:
        """Note what the store spilled before this pool's episodes (only what they add counts)."""
        spilled = self._spilled()
        with self._lock:
            self._spilled_before = spilled

    def in_flight(self, count: int) -> None:
        """The pool has ``count`` episodes under way now (a rollout batch is about the peak)."""
        with self._lock:
            self.peak_in_flight = max(self.peak_in_flight, count)

    def received(self, episode_bytes: Sequence[int]) -> None:
        """Count a reply's episodes (each its large buffers' bytes), then check the store if it is
        time to."""
        with self._lock:
            self.episodes += len(episode_bytes)
            self.bytes += sum(episode_bytes)
            self.largest = max([self.largest, *episode_bytes])
            now = self._clock()
            if now - self._checked < CHECK_EVERY_S:
                return
            self._checked = now
        self.check()

    def needed(self) -> int:
        """The store size a batch needs: bytes per episode x the peak episodes in flight x HEADROOM."""
        with self._lock:
            if not self.episodes:
                return 0
            batch = max(self.peak_in_flight, 1) * self.bytes / self.episodes
            return int(max(batch, self.largest) * HEADROOM)

    def check(self) -> str | None:
        """Look at the store now; warn (rate limited) and return why if it is too small."""
        capacity, spilled, needed = self._capacity(), self._spilled(), self.needed()
        with self._lock:
            before = self._spilled_before
            grown = spilled - before if spilled is not None and before is not None else 0
            if before is None:
                self._spilled_before = spilled
            small = capacity is not None and needed > capacity
            if not (grown > 0 or small):
                return None
            # a store that spilled held more than it has: at least that much more is needed
            needed = max(needed, (capacity or 0) + int(grown * HEADROOM))
            why = self._why(capacity, grown, needed)
            now = self._clock()
            if now - self._warned < WARN_EVERY_S:
                return why
            self._warned = now
            self._spilled_before = spilled if grown > 0 else self._spilled_before
        self._warn(why)
        return why

    def _why(self, capacity: int | None, spilled: int, needed: int) -> str:
        per_episode = self.bytes / max(self.episodes, 1)
        store = f"{capacity / MB:,.0f} MB" if capacity is not None else "of unknown size"
        spill = f", and it spilled {spilled / MB:,.0f} MB to disk" if spilled > 0 else ""
        return (
            f"vlm-envs: Ray's object store ({store} on the cluster) is too small for this rollout{spill}: "
            f"its episodes hold about {per_episode / MB:.1f} MB each until the trainer drops the batch, "
            f"{self.peak_in_flight} in flight (largest {self.largest / MB:.1f} MB); start Ray with "
            f"--object-store-memory of at least {needed / MB:,.0f} MB in all (docs/executors.md, "
            "'Sizing the object store'), else spilling slows the rollout many times over"
        )
