"""``vlm-envs make-sft``: demonstrations streamed to SFT files, with a manifest, swapped in whole.

``--out`` is checked before the first episode; the data is written episode by episode into a folder
beside it (:mod:`vlm_envs.sft.folder`), which replaces ``--out`` only once complete, so memory stays
flat in the number of episodes and an interrupted run leaves the old folder or the new one. The same
arguments write the same bytes: seeds are played in order, images are named by content, and the
manifest holds no time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vlm_envs.rollout.history import History
from vlm_envs.sft import formats
from vlm_envs.sft.demos import Demonstration
from vlm_envs.sft.folder import MADE_BY, MANIFEST, Aside, FolderError, check_out
from vlm_envs.sft.samples import conversations
from vlm_envs.sft.sources import (
    EnvTally,
    OracleSource,
    RunSource,
    SftError,
    count_records,
    oracle_demos,
    read_run,
    run_demos,
)
from vlm_envs.sft.writers import DATA_FILES, Writer, open_writer

#: ``progress(done, total, kept)`` after each episode.
Progress = Callable[[int, int, int], None]
SPECIAL_TOKENS_SKIP = "special tokens in text"


@dataclasses.dataclass(frozen=True)
class SftFiles:
    """What make-sft wrote; ``failed``: episodes whose env raised (listed in the manifest)."""

    out: Path
    format: str
    conversations: int
    rows: int
    manifest: dict[str, Any]
    failed: int = 0
    warnings: tuple[str, ...] = ()


def keeps(demo: Demonstration, min_reward: float | None) -> bool:
    """Whether a demonstration is kept: a success, or a reward of at least ``min_reward``."""
    return demo.success if min_reward is None else demo.reward >= min_reward


def make_sft(
    source: OracleSource | RunSource,
    out: str | Path,
    fmt: str = "trl",
    history: str = "full",
    force: bool = False,
    progress: Progress | None = None,
    model: str | None = None,
) -> SftFiles:
    """Write the demonstrations of ``source`` to the folder ``out`` in format ``fmt``.

    Oracle play keeps its successes (an oracle that loses says the cap or config is too tight);
    a run keeps what :func:`keeps` accepts. An episode with a control token written as text is
    dropped and counted. ``model`` (``trl`` conversations only): refuse a model whose template TRL
    cannot mask. Raises :class:`SftError` for anything the user must fix.
    """
    if fmt not in formats.FORMATS:
        raise SftError(f"--format must be one of {', '.join(formats.FORMATS)}, got {fmt!r}")
    try:
        window = History.parse(history)
    except ValueError as err:
        raise SftError(str(err)) from None
    if model is not None:
        if fmt != "trl" or not window.full:
            raise SftError(
                "--model checks TRL's templates for whole conversations: give it with --format trl"
            )
        from vlm_envs.sft.trl_template import check_model

        check_model(model)
    if not str(out).strip():  # Path("") is the working folder
        raise SftError("--out is empty: give a folder")
    out = Path(out)
    protected = [source.run_dir] if isinstance(source, RunSource) else []
    try:
        check_out(out, force, protected)
        if isinstance(source, RunSource):
            read_run(source.run_dir)  # a bad run is refused before anything is written
        aside = Aside(out)
    except FolderError as err:
        raise SftError(str(err)) from None
    try:
        files = _write(source, aside.path, out, fmt, window, progress)
        aside.swap_in(force, protected)
    except FolderError as err:
        raise SftError(str(err)) from None
    except OSError as err:
        aside.discard()
        raise SftError(f"cannot write {str(out)!r}: {err.strerror or err}") from None
    except BaseException:
        aside.discard()
        raise
    return files


def _write(
    source: OracleSource | RunSource,
    root: Path,
    out: Path,
    fmt: str,
    window: History,
    progress: Progress | None,
) -> SftFiles:
    """Play and write every episode into ``root``, then its manifest."""
    tallies: dict[str, EnvTally] = {}
    writer = open_writer(fmt, root, per_reply=fmt == "trl" and not window.full)
    total = source.episodes if isinstance(source, OracleSource) else count_records(source.run_dir)
    min_reward = source.min_reward if isinstance(source, RunSource) else None
    done = kept = 0
    try:
        for demo in _demos(source, tallies):
            tally = tallies[demo.env]
            tally.episodes += 1
            tally.successes += demo.success
            done += 1
            if demo.special_tokens():
                tally.skip(SPECIAL_TOKENS_SKIP)
            elif keeps(demo, min_reward):
                tally.kept_seeds.append(demo.seed)
                kept += 1
                for conversation in conversations(demo, window):
                    writer.add(conversation, demo.env, demo.seed)
            if progress is not None:
                progress(done, total, kept)
    finally:
        writer.close()
    failed = sum(len(t.failed) for t in tallies.values())
    if kept == 0:
        raise SftError(_nothing_kept(source, tallies))
    warnings = tuple(
        f"{name}: kept none of its {t.episodes} episodes"
        for name, t in sorted(tallies.items())
        if not t.kept_seeds
    )
    manifest = _manifest(source, fmt, window, tallies, writer, root)
    (root / MANIFEST).write_bytes((json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    return SftFiles(out, fmt, writer.conversations, writer.rows, manifest, failed, warnings)


def _demos(source: OracleSource | RunSource, tallies: dict[str, EnvTally]) -> Iterator[Demonstration]:
    return oracle_demos(source, tallies) if isinstance(source, OracleSource) else run_demos(source, tallies)


def _nothing_kept(source: OracleSource | RunSource, tallies: dict[str, EnvTally]) -> str:
    played = sum(t.episodes for t in tallies.values())
    failed = sum(len(t.failed) for t in tallies.values())
    if failed and failed == played:
        first = next(err for t in tallies.values() for err in t.failed.values())
        return f"every episode failed (the first: {first}); nothing written"
    if isinstance(source, OracleSource):
        cap = f" with --max-turns {source.max_turns}" if source.max_turns is not None else ""
        return f"the oracle won none of its {played} episodes{cap}: raise --max-turns or ease --config"
    wanted = "a success" if source.min_reward is None else f"a reward of at least {source.min_reward}"
    skipped = sum(sum(t.skipped.values()) for t in tallies.values())
    return (
        f"no episode of {source.run_dir} has {wanted} ({played} replayed, {skipped} skipped); nothing written"
    )


def _manifest(
    source: OracleSource | RunSource,
    fmt: str,
    window: History,
    tallies: dict[str, EnvTally],
    writer: Writer,
    root: Path,
) -> dict[str, Any]:
    import vlm_envs

    if isinstance(source, OracleSource):
        origin: dict[str, Any] = {
            "kind": "oracle",
            "seeds": [source.seed, source.seed + source.n - 1],
            "max_turns": source.max_turns,
            "rationale": source.rationale,
            "kept": "successes",
        }
    else:
        origin = {
            "kind": "eval run",
            "run_dir": str(source.run_dir),
            "kept": "successes" if source.min_reward is None else f"reward >= {source.min_reward}",
        }
    per_reply = fmt == "trl" and not window.full
    return {
        "made_by": MADE_BY,
        "vlm_envs_version": vlm_envs.__version__,
        "format": fmt,
        "data": DATA_FILES[fmt],
        "layout": "one row per reply" if per_reply else "one conversation per row",
        "history": str(window),
        "source": origin,
        "envs": {
            name: {
                "version": t.version,
                "config": t.config,
                "episodes": t.episodes,
                "source_success_rate": t.successes / t.episodes if t.episodes else None,
                "kept": len(t.kept_seeds),
                "kept_seeds": t.kept_seeds,
                **({"skipped": t.skipped} if t.skipped else {}),
                **({"failed": t.failed} if t.failed else {}),
            }
            for name, t in sorted(tallies.items())
        },
        "conversations": writer.conversations,
        "rows": writer.rows,
        "broken_image_tags": writer.broken_tags,
        "tool_turns": writer.tool_turns,
        "failed": sum(len(t.failed) for t in tallies.values()),
        "files": _digests(root),
    }


def _digests(root: Path) -> dict[str, str]:
    """The SHA-256 of every file under ``root`` but the manifest, read in chunks."""
    digests = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel != MANIFEST:
            digest = hashlib.sha256()
            with path.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
            digests[rel] = digest.hexdigest()
    return digests
