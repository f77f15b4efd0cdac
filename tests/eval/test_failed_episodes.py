"""Failed episodes are counted and shown; an eval in which every episode failed exits 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlm_envs.cli import main


def _eval(out: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "toyenvs.guess:CrashingEnv",
        "--policy",
        "random",
        "-n",
        "4",
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def test_every_episode_failed_exits_1_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(_eval(out)) == 1
    printed = capsys.readouterr().out
    assert "FAILED: 4 of 4 episodes (first error: env: RuntimeError: the grader is down (seed 0))" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == 4 and summary["status_counts"] == {"failed": 4}
    assert summary["first_error"] == "env: RuntimeError: the grader is down (seed 0)"
    assert (out / "index.html").exists()  # the report is still written


def test_some_failed_episodes_exit_0_and_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "--config", "odd_only=true")) == 0
    printed = capsys.readouterr().out
    assert "FAILED: 2 of 4 episodes (first error: env: RuntimeError: the grader is down (seed 1))" in printed
    assert json.loads((out / "summary.json").read_text())["failed"] == 2


def test_no_failed_line_when_nothing_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    argv = ["eval", "toyenvs.guess:GuessEnv", "--policy", "random", "-n", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    assert "FAILED" not in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["failed"] == 0


def test_eval_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "1 when every episode FAILED" in text and "--resume without -n" in text


def test_a_non_finite_step_reward_fails_the_episode_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["eval", "toyenvs.broken:NanReward", "--policy", "random", "-n", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 1
    assert (
        "first error: reward: the step reward of turn 0 is nan, not a finite number"
        in capsys.readouterr().out
    )
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        assert record["status"] == "failed" and record["reward"] == 0.0
        assert [turn.get("reward") for turn in record["turns"][1:]] == [0.0]  # never null, never NaN
