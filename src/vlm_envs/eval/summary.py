"""``summary.json``: success rate with a 95% Wilson interval, reward, turns, tokens and metric means."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

Z_95 = 1.959963984540054  # the 97.5th percentile of the standard normal


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (``(0, 1)`` when ``n == 0``)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    return None


def _metric_values(metric_dicts: Iterable[Mapping[str, Any]]) -> dict[str, list[float]]:
    values: dict[str, list[float]] = defaultdict(list)
    for metrics in metric_dicts:
        for name, value in (metrics or {}).items():
            number = _numeric(value)
            if number is not None:
                values[name].append(number)
    return dict(sorted(values.items()))


def summarize(records: list[Mapping[str, Any]], run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of ``results.jsonl`` records (``run`` is copied in as the run's description).

    ``metrics`` averages each episode's final metrics over the episodes that report them
    (``metric_counts`` says how many); ``turn_metrics`` averages every turn's. ``failed`` counts
    the episodes that ended ``failed`` and ``first_error`` is the first one's error, in record order.
    """
    n = len(records)
    successes = sum(bool(r.get("success")) for r in records)
    low, high = wilson_interval(successes, n)
    tokens = [float(r["tokens"]) for r in records if r.get("tokens") is not None]
    generated = [float(r["generated_tokens"]) for r in records if r.get("generated_tokens") is not None]
    turn_metrics = (t.get("metrics") or {} for r in records for t in r.get("turns", []) if "metrics" in t)
    final = _metric_values(r.get("metrics") or {} for r in records)
    failed = [r for r in records if r.get("status") == "failed"]
    return {
        "run": dict(run or {}),
        "episodes": n,
        "success_rate": successes / n if n else None,
        "success_ci95": [low, high],
        "successes": successes,
        "mean_reward": _mean([float(r.get("reward") or 0.0) for r in records]),
        "mean_turns": _mean([float(r.get("num_turns") or 0) for r in records]),
        "mean_tokens": _mean(tokens),
        "mean_generated_tokens": _mean(generated),
        "status_counts": dict(sorted(Counter(str(r.get("status")) for r in records).items())),
        "failed": len(failed),
        "first_error": failed[0].get("error") if failed else None,
        "metrics": {name: sum(v) / len(v) for name, v in final.items()},
        "metric_counts": {name: len(v) for name, v in final.items()},
        "turn_metrics": {name: sum(v) / len(v) for name, v in _metric_values(turn_metrics).items()},
    }
