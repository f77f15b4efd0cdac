"""``vlm-envs make-dataset``: it never replaces a user's files unasked, nor leaves half of one."""

from __future__ import annotations

import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vlm_envs.cli import main


def _make(out: Path, *extra: str) -> list[str]:
    return ["make-dataset", "sokoban", "-n", "2", "--out", str(out), "--config", "grid_size=[6,6]", *extra]


def _one_line_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("vlm-envs: error: ")
    return lines[0]


@pytest.mark.parametrize("trainer", ["slime", "verl"])
def test_existing_files_are_kept_unless_force(
    trainer: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train.parquet"
    yaml = out.with_suffix(".yaml" if trainer == "slime" else ".agent_loop.yaml")
    assert main(_make(out, "--trainer", trainer)) == 0
    capsys.readouterr()
    yaml.write_text(yaml.read_text() + "vlm_envs_workers: 4\n")  # what the README tells users to add
    before = out.read_bytes(), yaml.read_text()

    line = _one_line_error(capsys, main(_make(out, "--trainer", trainer, "--seed", "9")))
    assert str(out) in line and str(yaml) in line and "--force" in line
    assert (out.read_bytes(), yaml.read_text()) == before

    assert main(_make(out, "--trainer", trainer, "--seed", "9", "--force")) == 0
    assert out.read_bytes() != before[0] and "vlm_envs_workers" not in yaml.read_text()


def test_a_yaml_left_alone_is_refused_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "train.parquet"
    out.with_suffix(".yaml").write_text("vlm_envs_workers: 4\n")
    line = _one_line_error(capsys, main(_make(out)))
    assert "train.yaml" in line and not out.exists()


def test_an_out_whose_yaml_would_be_itself_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_error(capsys, main(_make(tmp_path / "train.yaml")))
    assert "--out" in line and ".parquet" in line


def test_an_unwritable_out_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    line = _one_line_error(capsys, main(_make(blocker / "train.parquet")))
    assert f"cannot write {str(blocker / 'train.parquet')!r}" in line


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))  # writes past 2 kB fail, as on a full disk


def test_a_write_that_fails_halfway_leaves_the_old_files_whole(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    assert main(_make(out)) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert len(before) == 2 and len(before["train.parquet"]) > 2000
    cmd = [sys.executable, "-m", "vlm_envs.cli", *_make(out, "--seed", "5", "--force")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"vlm-envs: error: cannot write {str(out)!r}: File too large")
    assert proc.stderr.count("\n") == 1
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing cut, nothing left over


def test_sigterm_leaves_the_old_files_and_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    assert main(_make(out)) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    cmd = [
        sys.executable,
        "-m",
        "vlm_envs.cli",
        "make-dataset",
        "sokoban",
        "-n",
        "1000000",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen([*cmd, "--force"], stderr=subprocess.PIPE, text=True)
    partial = tmp_path / f".train.parquet.tmp-{proc.pid}"
    deadline = time.monotonic() + 120
    while not partial.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    assert partial.exists(), "make-dataset never started writing"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
