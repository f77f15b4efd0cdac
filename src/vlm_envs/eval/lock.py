"""One writer per results folder: an OS lock on ``FOLDER/run.lock`` that dies with its process.

``flock`` is released by the kernel when the holder exits, however it exits (SIGKILL included), so
a killed run leaves no stale lock (only an empty or named ``run.lock``, which locks nothing). The
file names the holder (pid, host, start time) for the run that is turned away; the holder removes it
when it finishes, still holding the lock. A run that locked a file just removed (it opened the name
before the removal) sees that the name no longer points at its file, and locks the new one.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

LOCK_FILE = "run.lock"


class FolderBusyError(Exception):
    """Another process holds the folder's lock."""


def _holder(fd: int) -> str:
    """Who holds the lock, from what the holder wrote into the lock file."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its name yet"


def _locked(path: Path) -> int:
    """A descriptor of ``path`` holding its lock; :class:`FolderBusyError` if another process holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderBusyError(holder) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:  # removed by its last holder after we opened it
            pass
        os.close(fd)  # a file no longer at the name locks nothing: lock the one there now


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock for the ``with`` block; raise :class:`FolderBusyError` if it is held."""
    path = folder / LOCK_FILE
    fd = _locked(path)
    try:
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # while still locked: the next run makes its own
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
