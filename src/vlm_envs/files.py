"""Files a user keeps (datasets, YAML, summaries, reports) are replaced whole or not at all.

Each is written to a temporary file in the same folder and renamed over the old one, so a kill or a
full disk in the middle leaves the old file as it was (and at worst a hidden ``.NAME.tmp-PID`` file
next to it), never a truncated one. A file that cannot be written raises :class:`OutputError`
naming it, with the system's reason.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


class OutputError(Exception):
    """A file the user asked for cannot be written (unwritable folder, full disk, a file in the way)."""


def _reason(err: OSError) -> str:
    return err.strerror or str(err)


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path to write ``path``'s new content to; it replaces ``path`` when the block ends.

    The folder is created if needed. If the block raises, ``path`` is left as it was and the
    temporary file is removed; an ``OSError`` becomes :class:`OutputError`.
    """
    target = Path(path)
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
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
