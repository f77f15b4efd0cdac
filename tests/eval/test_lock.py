"""The results folder's lock: held for the run, refused to a second holder, and gone (no empty
``run.lock`` left) when the run ends; a run that opened the file just as its last holder removed it
locks the new one instead of the removed one."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from vlm_envs.eval import lock
from vlm_envs.eval.lock import LOCK_FILE, FolderBusyError, folder_lock


def test_the_lock_names_its_holder_turns_a_second_away_and_leaves_nothing(tmp_path: Path) -> None:
    with folder_lock(tmp_path):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
        with pytest.raises(FolderBusyError, match=f"pid {os.getpid()} on "), folder_lock(tmp_path):
            pass
        assert (tmp_path / LOCK_FILE).exists()  # the refused run removed nothing
    assert list(tmp_path.iterdir()) == []
    with folder_lock(tmp_path):  # and the next run takes the folder
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_lock_file_removed_after_it_was_opened_is_not_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ``flock`` lands on a file its last holder has just removed (as a finishing run
    does): the run must lock the file now at the name, else a third run could lock that one too."""
    calls: list[int] = []
    real_flock = fcntl.flock

    def flock_after_a_removal(fd: int, operation: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            os.unlink(tmp_path / LOCK_FILE)
        real_flock(fd, operation)

    monkeypatch.setattr(lock.fcntl, "flock", flock_after_a_removal)
    with folder_lock(tmp_path):
        held = tmp_path / LOCK_FILE
        assert len(calls) == 2 and json.loads(held.read_text())["pid"] == os.getpid()
        monkeypatch.setattr(lock.fcntl, "flock", real_flock)
        with pytest.raises(FolderBusyError), folder_lock(tmp_path):  # a third run is turned away
            pass
    assert not (tmp_path / LOCK_FILE).exists()
