"""One writer per results folder: an OS lock on ``FOLDER/run.lock`` that dies with its process.

``flock`` is released by the kernel when the holder exits, however it exits (SIGKILL included), so
a killed run leaves no stale lock. The file names the holder (pid, host, start time) for the run
that is turned away; it is emptied when the holder finishes.
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


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder``'s lock for the ``with`` block; raise :class:`FolderBusyError` if it is held."""
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusyError(_holder(fd)) from None
        started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": started}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # closing the last descriptor releases the lock
