"""What ``/metrics`` counts: sessions, calls and their latency, worker restarts, refusals by cause.

Everything here runs on the server's event loop (no locks). :meth:`ServeMetrics.render` writes
Prometheus' text exposition format (version 0.0.4).
"""

from __future__ import annotations

import collections
import dataclasses

#: Upper bounds (seconds) of the call latency histogram's buckets.
LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclasses.dataclass
class ServeMetrics:
    """Counters of one server, read by ``GET /metrics``."""

    calls: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    refusals: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    worker_restarts: int = 0
    latency_counts: list[int] = dataclasses.field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_S) + 1))
    latency_sum_s: float = 0.0

    def call_done(self, op: str, seconds: float) -> None:
        """A call ``op`` (reset, step, state) answered after ``seconds``."""
        self.calls[op] += 1
        self.latency_sum_s += seconds
        index = next((i for i, bound in enumerate(LATENCY_BUCKETS_S) if seconds <= bound), -1)
        self.latency_counts[index] += 1

    def refused(self, cause: str) -> None:
        """Something refused for ``cause`` (``capacity``, ``memory``, ``deadline``, ``config``, ...)."""
        self.refusals[cause] += 1

    def worker_restarted(self) -> None:
        self.worker_restarts += 1
