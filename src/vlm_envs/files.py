"""Files a user keeps (datasets, YAML, summaries, reports) are replaced whole or not at all.

Each is written to a temporary file in the same folder and renamed over the old one, so a kill or a
full disk in the middle leaves the old file as it was, never a truncated one. The temporary file
(``.NAME.tmp-PID``) is removed on an error and on SIGTERM; one that a killed writer left (SIGKILL,
power loss) is removed by the next write of the same file once its process is gone. A file that
cannot be written raises :class:`OutputError` naming it, with the system's reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType


class OutputError(Exception):
    """A file the user asked for cannot be written (unwritable folder, full disk, a file in the way)."""


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive; a number no PID can be, not)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def _temporary_name(target: Path, pid: int) -> Path:
    return target.with_name(f".{target.name}.tmp-{pid}")


def _remove_stale(target: Path) -> None:
    """Delete ``target``'s temporary files whose writer is gone (only names of :func:`replacing`'s own form,
    ``.NAME.tmp-PID``, whose PID no process holds)."""
    prefix = _temporary_name(target, 0).name[:-1]
    with contextlib.suppress(OSError):
        for sibling in target.parent.iterdir():
            pid = sibling.name[len(prefix) :] if sibling.name.startswith(prefix) else ""
            if pid.isascii() and pid.isdigit() and int(pid) != os.getpid() and not process_alive(int(pid)):
                with contextlib.suppress(OSError):
                    sibling.unlink()


def _exit_on_terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def _terminate_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM ends the process through ``SystemExit`` (exit code 143), so ``finally``
    blocks run; only in the main thread and where SIGTERM has its default action (a host that handles it
    keeps its own handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _exit_on_terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it replaces ``path`` when the block ends.

    The folder is created if needed, and temporary files of ``path`` that dead writers left are removed.
    If the block raises or the process gets SIGTERM, ``path`` is left as it was and the temporary file
    is removed; an ``OSError`` becomes :class:`OutputError`.
    """
    target = Path(path)
    partial = _temporary_name(target, os.getpid())
    with _terminate_unwinds():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _remove_stale(target)
            yield partial
            with open(partial, "rb+") as f:  # on disk before the rename, so the rename never exposes a hole
                os.fsync(f.fileno())
            os.replace(partial, target)
        except OSError as err:
            raise OutputError(f"cannot write {str(target)!r}: {_reason(err)}") from err
        finally:
            with contextlib.suppress(OSError):
                partial.unlink()


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through :func:`replacing`; returns ``path``."""
    with replacing(path) as partial:
        partial.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(path)
