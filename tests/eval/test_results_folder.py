"""The eval output folder under misuse: corrupt lines, two runs at once, a shrinking ``--resume -n``.

Each case is a real ``vlm-envs eval`` run (in process through ``main`` or as a subprocess) on real
files; the lock tests hold the folder from a second real process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vlm_envs.cli import main

SUPPORT = Path(__file__).resolve().parents[1] / "support"
GUESS = "toyenvs.guess:GuessEnv"


def _eval(out: Path, *extra: str, env: str = GUESS) -> list[str]:
    return ["eval", env, "--policy", "random", "--out", str(out), "--quiet", *extra]


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("vlm-envs: error: ")
    return err


def _subprocess_env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(SUPPORT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.parametrize(
    ("bad_line", "why"),
    [
        ('{"episode": 2, "seed": 2, "sta', "Unterminated string"),  # a torn write, then more lines
        ("[1, 2, 3]", "not an object"),
        ('{"episode": "two"}', "not an index"),
        ("\udcff", "codec can't decode"),  # invalid UTF-8
    ],
)
def test_a_corrupt_middle_line_is_one_error_with_its_line_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad_line: str, why: str
) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "-n", "4")) == 0
    lines = _lines(out)
    damaged = "\n".join([*lines[:2], bad_line, *lines[2:]]) + "\n"
    (out / "results.jsonl").write_bytes(damaged.encode("utf-8", "surrogateescape"))
    assert main(_eval(out, "-n", "6", "--resume")) == 2
    err = _error_line(capsys)
    assert f"{out / 'results.jsonl'}:3: not an episode record" in err
    assert why in err and "delete that line" in err
    assert (out / "results.jsonl").read_bytes() == damaged.encode("utf-8", "surrogateescape")  # untouched


def test_deleting_the_named_line_lets_resume_play_that_episode_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "-n", "4")) == 0
    lines = _lines(out)
    (out / "results.jsonl").write_text("\n".join([lines[0], "garbage", *lines[2:]]) + "\n")
    assert main(_eval(out, "--resume")) == 2
    assert "results.jsonl:2:" in _error_line(capsys)
    (out / "results.jsonl").write_text("\n".join([lines[0], *lines[2:]]) + "\n")  # what the message says
    assert main(_eval(out, "--resume")) == 0
    assert sorted(json.loads(line)["episode"] for line in _lines(out)) == [0, 1, 2, 3]


def test_a_corrupt_run_json_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "-n", "2")) == 0
    (out / "run.json").write_text('{"env": ')
    assert main(_eval(out, "-n", "2", "--resume")) == 2
    assert f"{out / 'run.json'} is not valid JSON" in _error_line(capsys)


def test_resume_with_n_below_the_recorded_episodes_is_refused_and_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "-n", "6")) == 0
    before = {name: (out / name).read_bytes() for name in ("results.jsonl", "summary.json", "run.json")}
    assert main(_eval(out, "-n", "3", "--resume")) == 2
    err = _error_line(capsys)
    assert "--resume -n 3" in err and "already records 6 episodes" in err and "pass -n 6 or more" in err
    assert {name: (out / name).read_bytes() for name in before} == before


def test_resume_without_n_continues_to_the_recorded_n(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(_eval(out, "-n", "40")) == 0  # more than the default of 32
    lines = _lines(out)
    (out / "results.jsonl").write_text("\n".join(lines[:25]) + "\n")  # as a kill would leave it
    assert main(_eval(out, "--resume")) == 0
    episodes = [json.loads(line)["episode"] for line in _lines(out)]
    assert sorted(episodes) == list(range(40))
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 40 and summary["run"]["n"] == 40


def _hold_lock(folder: Path) -> subprocess.Popen[str]:
    """A second process that locks ``folder`` as a run does, says so, and sleeps."""
    code = (
        "import sys, time; from pathlib import Path; from vlm_envs.eval.lock import folder_lock\n"
        "with folder_lock(Path(sys.argv[1])):\n    print('locked', flush=True); time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
    return proc


def test_a_locked_folder_turns_a_second_run_away_and_a_killed_holder_leaves_no_lock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    holder = _hold_lock(out)
    try:
        assert main(_eval(out, "-n", "3")) == 2
        err = _error_line(capsys)
        assert f"{str(out)!r} is in use by another run (pid {holder.pid} on " in err
        assert "started 20" in err
        assert not (out / "results.jsonl").exists()
    finally:
        holder.kill()  # SIGKILL: the kernel drops the lock with the process
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert main(_eval(out, "-n", "3")) == 0
    assert len(_lines(out)) == 3
    assert not (out / "run.lock").exists()  # a finished run leaves no lock file


@pytest.mark.slow
def test_two_resume_runs_at_once_one_is_turned_away_then_a_kill_leaves_no_stale_lock(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "vlm_envs.cli", *_eval(out, env="toyenvs.guess:SlowGuessEnv")]
    first = subprocess.Popen(
        [*cmd, "-n", "20000", "--concurrency", "1"], env=_subprocess_env(), stderr=subprocess.PIPE
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and first.poll() is None:
        if results.exists() and results.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.01)
    assert first.poll() is None, "the first run ended before the second started"

    second = subprocess.run(
        [*cmd, "-n", "20000", "--resume"], env=_subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 2, second.stderr
    assert f"is in use by another run (pid {first.pid} on " in second.stderr
    assert first.poll() is None  # the first run was never disturbed

    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert first.stderr is not None
    first.stderr.close()
    complete = results.read_bytes().count(b"\n")
    n = complete + 1  # the episodes the killed run finished, and one more
    third = subprocess.run(
        [*cmd, "-n", str(n), "--resume"], env=_subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert third.returncode == 0, third.stderr
    episodes = [json.loads(line)["episode"] for line in _lines(out)]
    assert sorted(episodes) == list(range(n))  # none lost, none written twice


def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (30_000, 30_000))  # a disk that fills at 30 kB per file


def test_a_report_that_cannot_be_written_leaves_the_old_one_whole(tmp_path: Path) -> None:
    out = tmp_path / "run"
    base = [sys.executable, "-m", "vlm_envs.cli", "eval", "sokoban", "--policy", "oracle", "--out", str(out)]
    assert subprocess.run([*base, "-n", "2", "--quiet"], capture_output=True, timeout=120).returncode == 0
    page = (out / "index.html").read_bytes()
    assert 10_000 < len(page) < 30_000
    proc = subprocess.run(
        [*base, "-n", "4", "--resume", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_file_size,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"vlm-envs: error: cannot write {str(out / 'index.html')!r}: File too large\n"
    assert (out / "index.html").read_bytes() == page  # not cut at 30 kB
    assert len(_lines(out)) == 4 and not [p for p in out.iterdir() if p.name.startswith(".")]
