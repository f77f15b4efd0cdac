"""``vlm-envs eval`` with the scripted policies: output files, determinism, and kill-then-resume."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from vlm_envs.cli import main


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_oracle_on_sokoban_solves_every_episode_and_writes_all_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["eval", "sokoban", "--policy", "oracle", "-n", "6", "--concurrency", "3", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "success 100.0%" in printed.out and str(out / "index.html") in printed.out
    assert "6/6 episodes" in printed.err  # the progress line
    records = _records(out)
    assert sorted(r["episode"] for r in records) == list(range(6))
    assert {r["seed"] for r in records} == set(range(6))
    for r in records:
        assert r["status"] == "completed" and r["success"] and r["reward"] == 1.0
        assert r["metrics"]["moves_used"] == r["metrics"]["optimal_moves"]
        assert r["num_turns"] == len(r["turns"]) - 1
        for turn in r["turns"]:
            for rel in turn["observation"]["images"]:
                with Image.open(out / rel) as im:
                    assert im.size[0] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 6 and summary["success_rate"] == 1.0
    assert summary["success_ci95"][0] < 1.0 == summary["success_ci95"][1]
    assert summary["run"]["policy"] == "oracle"
    assert (out / "index.html").read_text().startswith("<!DOCTYPE html>")


def test_oracle_on_geo3k_checks_with_the_tool_then_answers(tmp_path: Path) -> None:
    out = tmp_path / "geo"
    assert main(["eval", "geo3k", "--policy", "oracle", "-n", "3", "--out", str(out), "--quiet"]) == 0
    for r in _records(out):
        assert r["success"] and r["num_turns"] == 2
        tool_turn, final_turn = r["turns"][1], r["turns"][2]
        assert "<tool_call>" in tool_turn["model_text"]
        assert tool_turn["observation"]["role"] == "tool"
        assert "calc_score result: 1.0" in tool_turn["observation"]["text"]
        assert "\\boxed{" in final_turn["model_text"]
        assert r["turns"][0]["observation"]["images"]  # the diagram
    assert json.loads((out / "summary.json").read_text())["metrics"]["correct"] == 1.0


def test_random_policy_is_seeded_and_max_turns_caps_episodes(tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        argv = ["eval", "sokoban", "--policy", "random", "-n", "5", "--max-turns", "3", "--out", str(out)]
        assert main([*argv, "--quiet", "--seed", "100"]) == 0
        runs.append(sorted(_records(out), key=lambda r: r["episode"]))
    assert runs[0] == runs[1]  # records hold no timings: same seed, same episodes
    assert all(r["num_turns"] <= 3 for r in runs[0])
    assert [r["seed"] for r in runs[0]] == [100, 101, 102, 103, 104]


def test_resume_repairs_a_cut_line_and_refuses_a_different_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    base = ["eval", "sokoban", "--policy", "solver", "--out", str(out), "--quiet"]
    assert main([*base, "-n", "3"]) == 0
    with (out / "results.jsonl").open("a") as f:
        f.write('{"episode": 3, "seed": 3, "sta')  # what a kill in the middle of a write leaves
    assert main([*base, "-n", "3"]) == 2
    assert "already holds results" in capsys.readouterr().err
    assert main([*base, "-n", "5", "--resume"]) == 0
    assert sorted(r["episode"] for r in _records(out)) == [0, 1, 2, 3, 4]
    assert main([*base, "-n", "5", "--resume", "--seed", "7"]) == 2
    assert "seed differ" in capsys.readouterr().err


@pytest.mark.slow
def test_sigkill_halfway_then_resume_gives_exactly_n_results(tmp_path: Path) -> None:
    n = 40
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "vlm_envs.cli", "eval", "sokoban", "--policy", "solver", "-n", str(n)]
    cmd += ["--out", str(out), "--concurrency", "2", "--quiet", "--config", "grid_size=[8,8]"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and results.read_bytes().count(b"\n") >= 5:
            break
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = results.read_bytes().count(b"\n")
    assert 5 <= before < n
    proc.stderr.close()

    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    episodes = [r["episode"] for r in _records(out)]
    assert len(episodes) == n and sorted(episodes) == list(range(n))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == n and summary["success_rate"] == 1.0


def test_a_slime_shaped_env_module_runs_under_eval_and_play(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """slime's env shape (tests/support/slime_*_env.py) under eval and play; it has no episode reward (0)."""
    out = tmp_path / "run"
    argv = ["eval", "slime_image_env", "--policy", "random", "-n", "3", "--max-turns", "2", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    records = _records(out)
    assert len(records) == 3 and all(r["status"] != "failed" for r in records), records
    assert all(r["reward"] == 0.0 and "format_ok" in r["turns"][1]["metrics"] for r in records)
    monkeypatch.setattr("sys.stdin", io.StringIO("\\boxed{3}\n"))
    path = str(Path(__file__).parent / "support" / "slime_geo3k_env.py")
    assert main(["play", path, "--max-turns", "1"]) == 0
    assert "episode reward 0" in capsys.readouterr().out


def test_a_nan_metric_is_warned_about_once_per_metric_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "r")
    argv = ["eval", "toyenvs.broken:NanMetric", "--policy", "random", "-n", "12", "--out", out]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("vlm-envs: warning:") == 1, err
    assert "reported metric 'score' = nan" in err and "printed once per metric" in err
    assert all(t["metrics"]["score"] is None for r in _records(tmp_path / "r") for t in r["turns"][1:])


def test_solver_and_reference_are_old_names_of_oracle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "sokoban", "--policy", "solver", "-n", "2", "--quiet"]) == 0
    printed = capsys.readouterr()
    out = tmp_path / "runs" / "sokoban-oracle"  # the default folder is named by the one name
    assert printed.out.startswith("sokoban / oracle: 2 episodes, success 100.0%")
    assert printed.err == "vlm-envs: note: --policy solver is an old name of --policy oracle\n"
    assert json.loads((out / "run.json").read_text())["policy"] == "oracle"
    assert {r["policy"] for r in _records(out)} == {"oracle"}
    assert "with oracle</title>" in (out / "index.html").read_text()

    # a run recorded under an old name resumes under the new one, and the other way round
    run = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**run, "policy": "solver"}))
    assert main(["eval", "sokoban", "--policy", "oracle", "-n", "3", "--resume", "--quiet"]) == 0
    assert main(["eval", "sokoban", "--policy", "solver", "-n", "4", "--resume", "--quiet"]) == 0
    assert len(_records(out)) == 4

    assert main(["eval", "geo3k", "--policy", "reference", "-n", "1", "--quiet"]) == 0
    assert "geo3k / oracle: 1 episodes" in capsys.readouterr().out
    assert (tmp_path / "runs" / "geo3k-oracle" / "summary.json").exists()
