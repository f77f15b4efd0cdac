"""summary.json: the Wilson interval, means over the episodes that report a metric, statuses."""

from __future__ import annotations

import pytest

from vlm_envs.eval.summary import summarize, wilson_interval


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),  # textbook Wilson 95% values
        (10, 10, 0.7225, 1.0),
        (5, 10, 0.2366, 0.7634),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_wilson_interval_known_values(k: int, n: int, low: float, high: float) -> None:
    lo, hi = wilson_interval(k, n)
    assert lo == pytest.approx(low, abs=1e-4) and hi == pytest.approx(high, abs=1e-4)


def test_wilson_interval_of_nothing_is_everything() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_summarize_counts_means_and_partial_metrics() -> None:
    records = [
        {
            "success": True,
            "reward": 1.0,
            "num_turns": 2,
            "status": "completed",
            "tokens": 50,
            "generated_tokens": 10,
            "metrics": {"success": True, "moves": 4},
            "turns": [
                {"turn": 0},
                {"turn": 1, "metrics": {"valid": True}},
                {"turn": 2, "metrics": {"valid": False}},
            ],
        },
        {
            "success": False,
            "reward": 0.0,
            "num_turns": 8,
            "status": "truncated",
            "tokens": None,
            "generated_tokens": None,
            "metrics": {"moves": 9, "note": "text is not averaged"},
            "turns": [{"turn": 0}, {"turn": 1, "metrics": {"valid": True}}],
        },
    ]
    s = summarize(records, {"env": "sokoban"})
    assert s["run"] == {"env": "sokoban"}
    assert s["episodes"] == 2 and s["successes"] == 1 and s["success_rate"] == 0.5
    assert s["mean_reward"] == 0.5 and s["mean_turns"] == 5.0
    assert s["mean_tokens"] == 50.0 and s["mean_generated_tokens"] == 10.0  # only episodes that know them
    assert s["status_counts"] == {"completed": 1, "truncated": 1}
    assert s["metrics"] == {"moves": 6.5, "success": 1.0}
    assert s["metric_counts"] == {"moves": 2, "success": 1}
    assert s["turn_metrics"] == {"valid": pytest.approx(2 / 3)}


def test_summarize_empty() -> None:
    s = summarize([])
    assert s["episodes"] == 0 and s["success_rate"] is None and s["mean_reward"] is None
