"""What ``/metrics`` counts: sessions, calls and their latency, worker restarts, refusals by cause.

Everything here runs on the server's event loop (no locks). :meth:`ServeMetrics.render` writes
Prometheus' text exposition format (version 0.0.4).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses

#: The prefix of every metric's name.
PREFIX = "vlm_envs_serve_"
#: The ops whose call counts are always listed (0 before the first).
OPS = ("reset", "step", "state")
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
    #: Connections open now (HTTP and WebSocket), kept by the connection guard.
    connections: int = 0

    def call_done(self, op: str, seconds: float) -> None:
        """A call ``op`` (reset, step, state) answered after ``seconds``."""
        self.calls[op] += 1
        self.latency_sum_s += seconds
        self.latency_counts[bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1  # the last: past every bound

    def refused(self, cause: str) -> None:
        """Something refused for ``cause`` (``capacity``, ``memory``, ``deadline``, ``config``, ...)."""
        self.refusals[cause] += 1

    def worker_restarted(self) -> None:
        self.worker_restarts += 1

    def render(self, *, sessions: int, max_sessions: int, in_flight: int, workers: int) -> str:
        """Every metric in Prometheus' text format 0.0.4; the gauges the service knows are given."""
        lines: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
            lines.append(f"# HELP {PREFIX}{name} {help_text}")
            lines.append(f"# TYPE {PREFIX}{name} {kind}")
            lines.extend(f"{PREFIX}{name}{labels} {_number(value)}" for labels, value in samples)

        metric("sessions", "gauge", "Sessions open.", [("", sessions)])
        metric("max_sessions", "gauge", "Sessions the server holds at most.", [("", max_sessions)])
        metric("calls_in_flight", "gauge", "Env calls not answered yet.", [("", in_flight)])
        metric("connections", "gauge", "Connections open (HTTP and WebSocket).", [("", self.connections)])
        metric("workers", "gauge", "Env worker processes.", [("", workers)])
        ops = sorted(set(OPS) | set(self.calls))
        metric(
            "calls_total",
            "counter",
            "Env calls answered, by op.",
            [(_labels(op=op), self.calls[op]) for op in ops],
        )
        buckets, cumulative = [], 0
        for bound, count in zip((*map(repr, LATENCY_BUCKETS_S), "+Inf"), self.latency_counts, strict=True):
            cumulative += count
            buckets.append((_labels(le=bound), cumulative))
        lines.append(f"# HELP {PREFIX}call_duration_seconds Env call latency, every op.")
        lines.append(f"# TYPE {PREFIX}call_duration_seconds histogram")
        lines.extend(f"{PREFIX}call_duration_seconds_bucket{labels} {value}" for labels, value in buckets)
        lines.append(f"{PREFIX}call_duration_seconds_sum {_number(self.latency_sum_s)}")
        lines.append(f"{PREFIX}call_duration_seconds_count {cumulative}")
        metric("worker_restarts_total", "counter", "Workers restarted.", [("", self.worker_restarts)])
        metric(
            "refusals_total",
            "counter",
            "Requests, sessions and connections refused, by cause.",
            [(_labels(cause=cause), count) for cause, count in sorted(self.refusals.items())],
        )
        return "\n".join(lines) + "\n"


def _labels(**labels: str) -> str:
    """``{name="value",...}``, each value escaped as the format asks."""
    escaped = (f'{name}="{_escape(value)}"' for name, value in labels.items())
    return "{" + ",".join(escaped) + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    """A sample value as the format writes it (integers without a fraction)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))
