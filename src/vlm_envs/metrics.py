"""The mean of a metric over episodes: one rule for the eval's summary, its report and any log.

Every episode counts. An episode that does not report a metric, or reports it as something that is
not a finite number (``None``, NaN, text), counts as 0 for it: a missing ``success`` is a failure.
Averaging only over the episodes that report a metric made an env that reports ``success`` only when
an episode ends on its own read 100% while most episodes, cut by the turn cap, had failed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def metric_number(value: Any) -> float | None:
    """``value`` as a number a mean can hold (bools and finite ints/floats), else ``None``."""
    if isinstance(value, bool | int | float) and math.isfinite(float(value)):
        return float(value)
    return None


def metric_means(per_episode: Iterable[Mapping[str, Any] | None]) -> dict[str, float]:
    """The mean of each numeric metric over all episodes (one mapping each; ``None``: none reported).

    A name is listed once any episode reports a number for it; the other episodes count as 0.
    """
    sums: dict[str, float] = {}
    episodes = 0
    for metrics in per_episode:
        episodes += 1
        for name, value in (metrics or {}).items():
            number = metric_number(value)
            if number is not None:
                sums[str(name)] = sums.get(str(name), 0.0) + number
    return {name: sums[name] / episodes for name in sorted(sums)}


def metric_counts(per_episode: Iterable[Mapping[str, Any] | None]) -> dict[str, int]:
    """How many episodes report a number for each metric (the others count as 0 in the mean)."""
    counts: dict[str, int] = {}
    for metrics in per_episode:
        for name, value in (metrics or {}).items():
            if metric_number(value) is not None:
                counts[str(name)] = counts.get(str(name), 0) + 1
    return dict(sorted(counts.items()))
