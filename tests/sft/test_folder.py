"""make-sft never loses a folder: ``--force`` replaces only earlier make-sft output, never the working
folder, its parents, a mount point or the run being read; the new folder is written aside and swapped
in, so a kill at any moment leaves the old folder or the new one, complete."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from vlm_envs.sft import OracleSource, RunSource, SftError, make_sft
from vlm_envs.sft import folder as folder_module
from vlm_envs.sft.writers import TaggedWriter

OLD, NEW = OracleSource(("jigsaw",), 1), OracleSource(("jigsaw",), 2, seed=3)


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _complete(folder: Path) -> bool:
    """The folder holds exactly the files its manifest lists, with their digests."""
    files = _digests(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    files.pop("manifest.json")
    return files == manifest["files"]


@pytest.fixture
def old(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    out = tmp_path / "data"
    make_sft(OLD, out, fmt="swift")
    return out, _digests(out)


def test_force_replaces_make_sft_output_and_nothing_else(tmp_path: Path, old: tuple[Path, dict]) -> None:
    out, before = old
    with pytest.raises(SftError, match="--force"):
        make_sft(NEW, out, fmt="swift")
    assert _digests(out) == before
    (out / "notes.txt").write_text("mine")
    with pytest.raises(SftError, match=r"'notes\.txt', which make-sft did not write"):
        make_sft(NEW, out, fmt="swift", force=True)
    (out / "notes.txt").unlink()
    files = make_sft(NEW, out, fmt="swift", force=True)
    assert files.manifest["envs"]["jigsaw"]["kept_seeds"] == [3, 4] and _complete(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # nothing left beside it
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "manifest.json").write_text('{"made_by": "someone else"}')
    with pytest.raises(SftError, match="not make-sft's"):
        make_sft(NEW, theirs, fmt="swift", force=True)
    assert _digests(theirs) == {"manifest.json": hashlib.sha256(b'{"made_by": "someone else"}').hexdigest()}


def test_the_working_folder_its_parents_and_empty_out_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "precious.txt").write_text("keep")
    make_sft(OLD, work / "sft", fmt="swift")
    monkeypatch.chdir(work / "sft")  # even a make-sft folder is refused while it is the working folder
    for out in (".", "..", str(tmp_path), "/"):
        with pytest.raises(SftError, match="working folder or one above it"):
            make_sft(NEW, out, fmt="swift", force=True)
    with pytest.raises(SftError, match="--out is empty"):
        make_sft(NEW, "", fmt="swift", force=True)
    assert (work / "precious.txt").read_text() == "keep" and _complete(work / "sft")


def test_a_mount_point_is_refused(tmp_path: Path) -> None:
    mounts = [Path(p) for p in ("/proc", "/dev/shm", "/sys") if os.path.ismount(p)]
    assert mounts, "no mount point to try"
    for mount in mounts:
        with pytest.raises(SftError, match="mount point"):
            make_sft(NEW, mount, fmt="swift", force=True)


def test_the_run_being_read_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"env": "sokoban"}')
    (run / "results.jsonl").write_text("")
    for out in (run, run.parent):
        with pytest.raises(SftError, match="holds the run being read"):
            make_sft(RunSource(run), out, fmt="swift", force=True)
    assert (run / "run.json").is_file()


def test_an_unwritable_out_is_refused_before_the_first_episode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    played = []
    monkeypatch.setattr("vlm_envs.sft.sources.play_oracle", lambda *a, **k: played.append(a))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(SftError, match="cannot write"):  # a file where a parent folder must be
        make_sft(NEW, tmp_path / "a-file" / "out", fmt="swift")
    assert played == []


def test_force_is_refused_where_folders_cannot_be_swapped_in_one_step(
    old: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, before = old
    monkeypatch.setattr(folder_module, "_exchange", lambda a, b: False)
    with pytest.raises(SftError, match="cannot swap two folders in one step"):
        make_sft(NEW, out, fmt="swift", force=True)
    assert _digests(out) == before and [p.name for p in out.parent.iterdir()] == ["data"]


def test_a_failed_write_leaves_the_old_folder_whole(
    tmp_path: Path, old: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, before = old

    def full_disk(self: TaggedWriter, *args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TaggedWriter, "add", full_disk)
    with pytest.raises(SftError, match="No space left"):
        make_sft(NEW, out, fmt="swift", force=True)
    assert _digests(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["data"]  # no partial folder left behind


# ---- a kill at any moment --------------------------------------------------------------------------


def _kill_at(target: object, name: str, call: int, after: bool = False) -> None:
    """Replace ``target.name`` by a function that SIGKILLs this process at its ``call``-th call
    (before it runs, or ``after``)."""
    real = getattr(target, name)
    calls = [0]

    def wrapper(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        if calls[0] == call and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        result = real(*args, **kwargs)
        if calls[0] == call and after:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(target, name, wrapper)


class _Shutil:
    """``shutil`` for the folder module, whose ``rmtree`` is killed after deleting one file."""

    def __getattr__(self, name: str) -> object:
        import shutil

        return getattr(shutil, name)

    @staticmethod
    def rmtree(path: os.PathLike, ignore_errors: bool = False) -> None:
        files = [p for p in Path(path).rglob("*") if p.is_file()]
        if files and not ignore_errors:
            files[0].unlink()
            os.kill(os.getpid(), signal.SIGKILL)
        import shutil

        shutil.rmtree(path, ignore_errors=ignore_errors)


KILLS: dict[str, Callable[[], None]] = {
    "while writing": lambda: _kill_at(TaggedWriter, "add", 2),
    "before the swap": lambda: _kill_at(folder_module.Aside, "swap_in", 1),
    "before the exchange": lambda: _kill_at(folder_module, "_exchange", 1),
    "after the exchange": lambda: _kill_at(folder_module, "_exchange", 1, after=True),
    "deleting the old data": lambda: setattr(folder_module, "shutil", _Shutil()),
}


def _child(out: Path, kill: str) -> None:
    KILLS[kill]()
    make_sft(NEW, out, fmt="swift", force=True)
    os._exit(0)


@pytest.mark.parametrize("kill", list(KILLS))
def test_a_kill_at_any_moment_leaves_the_old_folder_or_the_new_one(old: tuple[Path, dict], kill: str) -> None:
    out, before = old
    child = multiprocessing.get_context("fork").Process(target=_child, args=(out, kill))
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL, f"{kill}: the child was not killed ({child.exitcode})"
    assert out.is_dir(), f"{kill}: no folder at {out}"
    assert _complete(out), f"{kill}: {out} is not a complete make-sft folder"
    after = _digests(out)
    kept = json.loads((out / "manifest.json").read_text())["envs"]["jigsaw"]["kept_seeds"]
    assert after == before or kept == [3, 4], kill
    # what the kill left beside it is hidden; the next run deletes it and replaces the folder as usual
    assert all(p.name.startswith(".data.partial-") for p in out.parent.iterdir() if p != out)
    make_sft(NEW, out, fmt="swift", force=True)
    assert _complete(out) and [p.name for p in out.parent.iterdir()] == ["data"]
