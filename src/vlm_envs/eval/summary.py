"""``summary.json``: success rate with a 95% Wilson interval, reward, turns, tokens and metric means, and
success per difficulty level."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

from vlm_envs.envs.config import LEVELS
from vlm_envs.metrics import metric_counts, metric_means

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


def level_of(record: Mapping[str, Any], run: Mapping[str, Any]) -> str | None:
    """An episode's difficulty level: its reset info's ``difficulty``, else the run's env config's."""
    info = record.get("reset_info")
    level = info.get("difficulty") if isinstance(info, Mapping) else None
    if level is None:
        config = run.get("env_config")
        level = config.get("difficulty") if isinstance(config, Mapping) else None
    return level if isinstance(level, str) else None


def by_level(records: list[Mapping[str, Any]], run: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Episodes, successes, success rate and its 95% interval per difficulty level (easiest first; empty
    when no episode has a level)."""
    groups: dict[str, list[bool]] = {}
    for record in records:
        level = level_of(record, run)
        if level is not None:
            groups.setdefault(level, []).append(bool(record.get("success")))
    order = sorted(groups, key=lambda lv: (LEVELS.index(lv) if lv in LEVELS else len(LEVELS), lv))
    levels = {}
    for level in order:
        n, successes = len(groups[level]), sum(groups[level])
        levels[level] = {
            "episodes": n,
            "successes": successes,
            "success_rate": successes / n,
            "success_ci95": list(wilson_interval(successes, n)),
        }
    return levels


def summarize(records: list[Mapping[str, Any]], run: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The summary of ``results.jsonl`` records (``run`` is copied in as the run's description).

    ``metrics`` averages each episode's final metrics over every episode, those that do not report a
    metric counting as 0 (:mod:`vlm_envs.metrics`; ``metric_counts`` says how many report it);
    ``turn_metrics`` averages every reply turn's the same way. ``failed`` counts
    the episodes that ended ``failed`` and ``first_error`` is the first one's error, in record order.
    ``by_difficulty`` gives success per difficulty level (:func:`by_level`). ``action_optimal_rate`` is
    the share of replies that lowered the distance to the goal by one, over the ``action_optimal_turns``
    replies whose env could tell (:mod:`vlm_envs.state_signals`); ``None`` where none could.
    """
    n = len(records)
    successes = sum(bool(r.get("success")) for r in records)
    low, high = wilson_interval(successes, n)
    tokens = [float(r["tokens"]) for r in records if r.get("tokens") is not None]
    generated = [float(r["generated_tokens"]) for r in records if r.get("generated_tokens") is not None]
    turn_metrics = [t.get("metrics") for r in records for t in r.get("turns", []) if "metrics" in t]
    final = [r.get("metrics") for r in records]
    failed = [r for r in records if r.get("status") == "failed"]
    optimal = [t.get("action_optimal") for r in records for t in r.get("turns", [])]
    judged = [o for o in optimal if isinstance(o, bool)]
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
        "metrics": metric_means(final),
        "metric_counts": metric_counts(final),
        "turn_metrics": metric_means(turn_metrics),
        "action_optimal_rate": sum(judged) / len(judged) if judged else None,
        "action_optimal_turns": len(judged),
        "by_difficulty": by_level(records, run or {}),
    }
