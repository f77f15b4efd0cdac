"""summary.json: the Wilson interval, metric means over every episode, statuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlm_envs.cli import main
from vlm_envs.eval.summary import summarize, wilson_interval
from vlm_envs.report import render_report


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


def test_summarize_counts_means_and_metrics_missing_from_some_episodes() -> None:
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
    assert s["metrics"] == {"moves": 6.5, "success": 0.5}  # the episode without success failed
    assert s["metric_counts"] == {"moves": 2, "success": 1}
    assert s["turn_metrics"] == {"valid": pytest.approx(2 / 3)}


def test_a_metric_only_finished_episodes_report_is_averaged_over_every_episode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sokoban reports success only when an episode ends on its own: the ones the turn cap cut count
    as failures in summary.json, the printed line and the report alike."""
    out = tmp_path / "run"
    assert main(["eval", "sokoban", "--policy", "random", "-n", "8", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert 0 < summary["metric_counts"]["success"] < 8  # some episodes were cut before reporting it
    assert summary["metrics"]["success"] == summary["success_rate"] == summary["successes"] / 8
    assert f"success {summary['success_rate']:.1%}" in printed
    page = (out / "index.html").read_text()
    assert f"<th>metric: success</th><td>{summary['success_rate']:.3f}" in page
    assert "the others count as 0" in page


def test_the_report_shows_the_summary_means() -> None:
    records = [{"episode": i, "metrics": {"success": True} if i == 0 else {}, "turns": []} for i in range(4)]
    page = render_report(records, summarize(records))
    assert "<th>metric: success</th><td>0.250 (1 of 4 episodes report it; the others count as 0)" in page


def test_summarize_empty() -> None:
    s = summarize([])
    assert s["episodes"] == 0 and s["success_rate"] is None and s["mean_reward"] is None
