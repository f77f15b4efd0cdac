"""Files a user keeps are replaced whole: a writer's temporary file goes on an error and on SIGTERM, and the
next write of the same file removes the ones dead writers left (its own name pattern, dead PIDs only)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from vlm_envs.files import process_alive, replacing, write_atomic


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_error_in_the_block_leaves_the_old_file_and_no_temporary_file(tmp_path: Path) -> None:
    target = write_atomic(tmp_path / "data.parquet", b"old")
    with pytest.raises(RuntimeError), replacing(target) as partial:
        partial.write_bytes(b"half")
        raise RuntimeError("the build failed")
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["data.parquet"]


def test_sigterm_during_a_write_removes_the_temporary_file_and_exits_143(tmp_path: Path) -> None:
    target = tmp_path / "data.parquet"
    target.write_bytes(b"old")
    child = textwrap.dedent(
        f"""
        import time
        from vlm_envs.files import replacing
        with replacing({str(target)!r}) as partial:
            partial.write_bytes(b"x" * 1000)
            time.sleep(60)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stderr=subprocess.PIPE, text=True)
    partial = tmp_path / f".data.parquet.tmp-{proc.pid}"
    deadline = time.monotonic() + 60
    while not partial.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert partial.exists(), "the writer never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert target.read_bytes() == b"old" and not partial.exists()


def test_stale_temporary_files_of_dead_writers_are_removed_and_nothing_else(tmp_path: Path) -> None:
    target = tmp_path / "train.parquet"
    dead = tmp_path / f".train.parquet.tmp-{_dead_pid()}"
    impossible = tmp_path / f".train.parquet.tmp-{10**30}"  # no process can hold it
    alive = tmp_path / f".train.parquet.tmp-{os.getppid()}"  # the test runner's parent: alive
    others = [
        tmp_path / ".train.parquet.tmp-12x",  # not a PID
        tmp_path / ".train.parquet.tmp-\u0663",  # not an ASCII one
        tmp_path / f".other.parquet.tmp-{_dead_pid()}",  # another file's
        tmp_path / f"train.parquet.tmp-{_dead_pid()}",  # not the hidden form
    ]
    for path in (dead, impossible, alive, *others):
        path.write_bytes(b"left behind")
    assert process_alive(os.getppid()) and not process_alive(int(dead.name.rsplit("-", 1)[1]))
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new" and not dead.exists() and not impossible.exists()
    assert alive.exists() and all(p.exists() for p in others)
