"""``vlm-envs make-sft``: demonstrations to SFT files, with a manifest, written whole or not at all.

The output folder is built beside its final place and renamed into it at the end, so an
interrupted run leaves no folder that looks complete (only a ``.NAME.partial-PID`` one). The same
arguments write the same bytes: seeds are played in order, images are named by content, and the
manifest holds no time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata as md
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vlm_envs.eval.config import build_configured_env
from vlm_envs.protocol import check_seed
from vlm_envs.registry import get_spec
from vlm_envs.rollout.history import History
from vlm_envs.sft import formats
from vlm_envs.sft.demos import Demonstration, DemonstrationError, play_oracle, replay_record
from vlm_envs.sft.samples import conversations

MANIFEST = "manifest.json"
#: The data file of each format, inside the output folder.
DATA_FILES = {
    "trl": "train.parquet",
    "llamafactory": "data.json",
    "sharegpt": "data.json",
    "swift": "data.jsonl",
}


class SftError(Exception):
    """make-sft cannot run as asked (bad source, format, output folder); one line for the user."""


@dataclasses.dataclass(frozen=True)
class OracleSource:
    """Oracle play of ``n`` seeds from ``seed`` for each env in ``envs``."""

    envs: tuple[str, ...]
    n: int
    seed: int = 0
    max_turns: int | None = None
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    rationale: bool = False

    def __post_init__(self) -> None:
        if not self.envs:
            raise SftError("name at least one env (or give --from RUN_DIR)")
        if self.env_config and len(self.envs) > 1:
            raise SftError("--config applies to one env: make the data of each env with its own config")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise SftError(f"-n must be a positive int, got {self.n!r}")
        try:
            check_seed(self.seed)
            check_seed(self.seed + self.n - 1)
        except (TypeError, ValueError) as err:
            raise SftError(f"--seed: {err}") from None


@dataclasses.dataclass(frozen=True)
class RunSource:
    """The episodes of a ``vlm-envs eval`` folder with a reward of at least ``min_reward``
    (``None``: its successes)."""

    run_dir: Path
    min_reward: float | None = None


@dataclasses.dataclass
class EnvTally:
    """What one env contributed: its episodes, the kept ones and their seeds."""

    version: str | None
    config: dict[str, Any]
    episodes: int = 0
    successes: int = 0
    kept_seeds: list[int] = dataclasses.field(default_factory=list)
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SftFiles:
    """What make-sft wrote."""

    out: Path
    format: str
    conversations: int
    rows: int
    manifest: dict[str, Any]


def _version(env: str) -> str | None:
    dist = get_spec(env).distribution
    if dist is None:
        return None
    with contextlib.suppress(md.PackageNotFoundError):
        return md.version(dist)
    return None


def oracle_demos(source: OracleSource, tallies: dict[str, EnvTally]) -> Iterator[Demonstration]:
    """Each env's oracle episodes, seed by seed."""
    for name in source.envs:
        tallies.setdefault(name, EnvTally(_version(name), dict(source.env_config)))
        env = build_configured_env(name, source.max_turns, source.env_config)
        try:
            for seed in range(source.seed, source.seed + source.n):
                yield play_oracle(env, name, seed, source.max_turns, source.rationale)
        finally:
            env.close()


def run_demos(source: RunSource, tallies: dict[str, EnvTally]) -> Iterator[Demonstration]:
    """The recorded episodes of an eval folder, replayed through the run's env in record order."""
    from vlm_envs.eval.runner import RESULTS, read_results, recorded_run

    run = recorded_run(source.run_dir)
    if run is None:
        raise SftError(f"{source.run_dir} holds no run.json: give a `vlm-envs eval` output folder")
    name, config, max_turns = run.get("env"), dict(run.get("env_config") or {}), run.get("max_turns")
    if not isinstance(name, str):
        raise SftError(f"{source.run_dir}/run.json names no env")
    tally = tallies.setdefault(name, EnvTally(_version(name), config))
    env = build_configured_env(name, max_turns, config)
    try:
        for record in sorted(read_results(source.run_dir / RESULTS), key=lambda r: r["episode"]):
            if record.get("status") not in ("completed", "truncated"):
                tally.skipped[str(record.get("status"))] = tally.skipped.get(str(record.get("status")), 0) + 1
                continue
            try:
                demo = replay_record(env, name, record, max_turns)
            except DemonstrationError as err:
                raise SftError(f"episode {record['episode']} of {source.run_dir}: {err}") from None
            if abs(demo.reward - float(record.get("reward") or 0.0)) > 1e-9:
                raise SftError(
                    f"episode {record['episode']} of {source.run_dir}: replayed reward {demo.reward} "
                    f"is not the recorded {record.get('reward')}"
                )
            yield demo
    finally:
        env.close()


def keeps(demo: Demonstration, min_reward: float | None) -> bool:
    """Whether a demonstration is kept: a success, or a reward of at least ``min_reward``."""
    return demo.success if min_reward is None else demo.reward >= min_reward


def make_sft(
    source: OracleSource | RunSource,
    out: str | Path,
    fmt: str = "trl",
    history: str = "full",
    force: bool = False,
) -> SftFiles:
    """Write the demonstrations of ``source`` to the folder ``out`` in format ``fmt``.

    Oracle play keeps its successes (an oracle that loses says the cap or config is too tight);
    a run keeps what :func:`keeps` accepts. Raises :class:`SftError` for anything the user must fix.
    """
    if fmt not in formats.FORMATS:
        raise SftError(f"--format must be one of {', '.join(formats.FORMATS)}, got {fmt!r}")
    try:
        window = History.parse(history)
    except ValueError as err:
        raise SftError(str(err)) from None
    out = Path(out)
    _check_out(out, force)
    tallies: dict[str, EnvTally] = {}
    min_reward = source.min_reward if isinstance(source, RunSource) else None
    demos = oracle_demos(source, tallies) if isinstance(source, OracleSource) else run_demos(source, tallies)
    writer = _Writer(fmt, out)
    for demo in demos:
        tally = tallies[demo.env]
        tally.episodes += 1
        tally.successes += demo.success
        if not keeps(demo, min_reward):
            continue
        tally.kept_seeds.append(demo.seed)
        for conversation in conversations(demo, window):
            writer.add(conversation, demo)
    files = writer.files()
    manifest = _manifest(source, fmt, str(window), tallies, writer, files)
    files[MANIFEST] = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    _write_folder(out, files, force)
    return SftFiles(out, fmt, writer.conversations, writer.rows, manifest)


class _Writer:
    """Collects one format's records and images."""

    def __init__(self, fmt: str, out: Path) -> None:
        self.fmt, self.root = fmt, out.resolve()
        self.store = formats.ImageStore()
        self.records: list[dict[str, Any]] = []
        self.trl: list[dict[str, Any]] = []
        self.trl_extra: dict[str, list[Any]] = {"env": [], "seed": [], "turn": []}
        self.conversations = self.rows = self.broken_tags = 0

    def add(self, conversation: formats.Conversation, demo: Demonstration) -> None:
        self.conversations += 1
        if self.fmt == "trl":
            rows = formats.trl_rows(conversation)
            first_turn = sum(m["role"] == "assistant" for m in conversation.messages) - len(rows)
            for k, row in enumerate(rows):
                self.trl.append(row)
                self.trl_extra["env"].append(demo.env)
                self.trl_extra["seed"].append(demo.seed)
                self.trl_extra["turn"].append(first_turn + k)
            self.rows += len(rows)
            return
        if self.fmt == "swift":
            record, broken = formats.swift_record(conversation, self.store, self.root)
        else:
            record, broken = formats.llamafactory_record(conversation, self.store)
        self.records.append(record)
        self.broken_tags += broken
        self.rows += 1

    def files(self) -> dict[str, bytes]:
        data = DATA_FILES[self.fmt]
        if self.fmt == "trl":
            return {data: formats.write_trl(self.trl, self.trl_extra)}
        files = dict(sorted(self.store.files.items()))
        if self.fmt == "swift":
            files[data] = formats.json_lines(self.records)
        else:
            files[data] = (json.dumps(self.records, ensure_ascii=False, indent=1) + "\n").encode()
            files["dataset_info.json"] = formats.llamafactory_info(data, bool(self.store.files))
        return files


def _manifest(
    source: OracleSource | RunSource,
    fmt: str,
    history: str,
    tallies: dict[str, EnvTally],
    writer: _Writer,
    files: Mapping[str, bytes],
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
    return {
        "vlm_envs_version": vlm_envs.__version__,
        "format": fmt,
        "history": history,
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
            }
            for name, t in sorted(tallies.items())
        },
        "conversations": writer.conversations,
        "rows": writer.rows,
        "broken_image_tags": writer.broken_tags,
        "files": {path: hashlib.sha256(data).hexdigest() for path, data in sorted(files.items())},
    }


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise SftError(f"--out {str(out)!r} is a file; give a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise SftError(f"--out {str(out)!r} is not empty; give --force to replace it")


def _write_folder(out: Path, files: Mapping[str, bytes], force: bool) -> None:
    """``files`` into a sibling folder, then renamed to ``out`` (an old ``out`` removed with ``force``)."""
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        for rel, data in files.items():
            target = partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        if out.exists():
            _check_out(out, force)
            shutil.rmtree(out)
        os.replace(partial, out)
    except OSError as err:
        shutil.rmtree(partial, ignore_errors=True)
        raise SftError(f"cannot write {str(out)!r}: {err.strerror or err}") from None
