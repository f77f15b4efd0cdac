"""make-sft's output folder: checked before the first episode, written aside, swapped in by rename.

The new data goes to a sibling ``.NAME.partial-PID`` folder. When it is complete, it takes ``NAME``'s
place: with no old folder by one rename; over an old one (``--force``) by one atomic exchange
(Linux ``renameat2(RENAME_EXCHANGE)``), after which the old data, now at the partial name, is
deleted. A file system that cannot exchange refuses ``--force`` (two renames would leave a moment
with no folder at all). So a kill at any moment leaves the old folder or the new one, complete,
under ``NAME`` (plus, at worst, a hidden sibling, which the next run deletes), never a mix.

``--force`` replaces only what make-sft wrote: a folder whose ``manifest.json`` says so and that holds
nothing but the files it lists; never the working folder or one above it, a mount point, a link or
the run being read.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from vlm_envs.files import process_alive

MANIFEST = "manifest.json"
#: The manifest's ``made_by`` value: what marks a folder as make-sft's own.
MADE_BY = "vlm-envs make-sft"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


class FolderError(Exception):
    """The output folder cannot be (re)written as asked; one line for the user."""


def check_out(out: Path, force: bool, protected: Iterable[Path] = ()) -> None:
    """Refuse an ``--out`` that make-sft must not write, before any episode is played.

    ``protected``: folders that must survive (the run read by ``--from``).
    """
    text = str(out)
    if out.is_symlink():
        raise FolderError(f"--out {text!r} is a link: give the folder itself")
    if out.exists() and not out.is_dir():
        raise FolderError(f"--out {text!r} is a file; give a folder")
    target = out.resolve()
    if target == Path(target.anchor) or target in (Path.cwd().resolve(), *Path.cwd().resolve().parents):
        raise FolderError(f"--out {text!r} is the working folder or one above it: give a folder of its own")
    for keep in protected:
        keep = keep.resolve()
        if target == keep or target in keep.parents:
            raise FolderError(f"--out {text!r} holds the run being read ({keep}): give another folder")
    if not out.is_dir() or not any(out.iterdir()):
        if out.is_dir() and os.path.ismount(out):
            raise FolderError(f"--out {text!r} is a mount point: give a folder inside it")
        return
    if not force:
        raise FolderError(f"--out {text!r} is not empty; give --force to replace earlier make-sft output")
    if os.path.ismount(out):
        raise FolderError(f"--out {text!r} is a mount point: --force replaces folders, not file systems")
    _check_ours(out)


def _check_ours(out: Path) -> None:
    """``out`` is make-sft output: its manifest says so and lists every file it holds."""
    refuse = f"--force replaces only make-sft output, and {str(out)!r}"
    try:
        manifest = json.loads((out / MANIFEST).read_bytes())
    except (OSError, ValueError):
        raise FolderError(f"{refuse} holds no readable {MANIFEST}") from None
    legacy = {"vlm_envs_version", "format", "conversations", "files"}  # make-sft before made_by
    if not isinstance(manifest, dict) or (manifest.get("made_by") != MADE_BY and not legacy <= set(manifest)):
        raise FolderError(f"{refuse}'s {MANIFEST} is not make-sft's")
    listed = manifest.get("files")
    listed = set(listed) if isinstance(listed, dict) else set()
    for path in sorted(out.rglob("*")):
        rel = path.relative_to(out).as_posix()
        if path.is_symlink() or (path.is_file() and rel != MANIFEST and rel not in listed):
            raise FolderError(f"{refuse} holds {rel!r}, which make-sft did not write")


class Aside:
    """The sibling folder the new data is written into, then swapped in for ``out``."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.path = out.parent / f".{out.name}.partial-{os.getpid()}"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            self._remove_stale()
            self.path.mkdir()
            probe = self.path / ".probe"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as err:
            self.discard()
            raise FolderError(f"cannot write {str(out)!r}: {err.strerror or err}") from None

    def _remove_stale(self) -> None:
        """Delete the aside folders of ``out`` that killed runs left (their process is gone)."""
        for sibling in self.out.parent.glob(f".{self.out.name}.partial-*"):
            pid = sibling.name.rsplit("-", 1)[1]
            if pid.isdigit() and (int(pid) == os.getpid() or not process_alive(int(pid))):
                shutil.rmtree(sibling, ignore_errors=True)

    def discard(self) -> None:
        """Delete the aside folder (the run failed or was refused)."""
        shutil.rmtree(self.path, ignore_errors=True)

    def swap_in(self, force: bool, protected: Iterable[Path] = ()) -> None:
        """Put the complete aside folder at ``out``; an old ``out`` (checked again) is deleted after."""
        try:
            check_out(self.out, force, protected)
            if not self.out.exists():
                os.rename(self.path, self.out)
                return
            if self.out.is_dir() and not any(self.out.iterdir()):
                self.out.rmdir()
                os.rename(self.path, self.out)
                return
            if not _exchange(self.path, self.out):
                raise FolderError(
                    f"--force cannot replace {str(self.out)!r} safely: its file system cannot swap "
                    "two folders in one step (renameat2 RENAME_EXCHANGE): delete it, or give another --out"
                )
            shutil.rmtree(self.path)  # the old data now lies at the aside name
        except OSError as err:
            self.discard()
            raise FolderError(f"cannot write {str(self.out)!r}: {err.strerror or err}") from None
        except FolderError:
            self.discard()
            raise


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically; ``False`` where the system or file system cannot."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    code = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if code == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err))
