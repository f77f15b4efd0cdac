"""Ctrl-C: the terminal sends SIGINT to the whole process group (the command and its worker
processes); the command answers with one line saying what it left behind, no traceback from anyone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def _interrupt(cmd: list[str], ready: Callable[[], bool], stdin: int | None = None) -> tuple[int, str]:
    """Run ``cmd`` in its own process group, press Ctrl-C once ``ready()``, return (exit code, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vlm_envs.cli", *cmd],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as a shell gives a foreground job
    )
    try:
        deadline = time.monotonic() + 60
        while not ready() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "the command ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc.returncode, err


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.timeout(150)
def test_ctrl_c_during_eval_is_one_line_not_worker_tracebacks(tmp_path: Path) -> None:
    out = tmp_path / "run"  # geo3k grades answers in worker processes: they get the SIGINT too
    cmd = ["eval", "geo3k", "--policy", "random", "-n", "100000", "--out", str(out), "--quiet"]
    code, err = _interrupt(cmd, lambda: _lines(out / "results.jsonl") >= 5)
    time.sleep(1)  # a worker's traceback would come after the command's own line
    assert code == 130
    assert err == "vlm-envs: interrupted (eval --resume continues where it stopped)\n"


@pytest.mark.timeout(150)
def test_ctrl_c_during_play_does_not_mention_eval(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    read, write = os.pipe()  # a player who never types
    try:
        code, err = _interrupt(
            ["play", "sokoban", "--save-frames", str(frames)], lambda: any(frames.glob("*.png")), stdin=read
        )
    finally:
        os.close(read)
        os.close(write)
    assert (code, err) == (130, "vlm-envs: interrupted\n")


@pytest.mark.timeout(150)
def test_ctrl_c_during_make_dataset_says_what_it_left(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    cmd = ["make-dataset", "sokoban", "-n", "100000", "--out", str(out)]
    started = time.monotonic()
    code, err = _interrupt(cmd, lambda: time.monotonic() - started > 4)  # building rows
    assert code == 130
    assert err == "vlm-envs: interrupted (no file is left half-written)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == []
