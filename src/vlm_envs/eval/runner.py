"""Run N episodes of an env with a policy, K at a time, into an output folder that survives a kill.

The folder holds ``run.json`` (what was asked), ``results.jsonl`` (one line per finished episode,
appended and flushed as it finishes), ``frames/`` (every observation image as PNG),
``summary.json`` and ``index.html``. Episode ``i`` plays seed ``seed + i``; ``resume`` plays only
the episodes missing from ``results.jsonl`` (a line cut short by a kill is dropped first; any
other bad line stops the run with its line number). ``run.lock`` keeps a second run out of a folder
while one writes to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from vlm_envs.eval.lock import LOCK_FILE, FolderBusyError, folder_lock
from vlm_envs.eval.policies import Policy, PolicyError, PolicyOptions
from vlm_envs.eval.policy_kinds import build_policy
from vlm_envs.eval.progress import Progress
from vlm_envs.eval.records import EpisodeResult, TurnResult, json_safe, to_record
from vlm_envs.eval.summary import summarize
from vlm_envs.protocol import DEFAULT_MAX_TURNS, Env
from vlm_envs.registry import EnvLoadError, UnknownEnvError, build_env

RESULTS, SUMMARY, RUN, REPORT = "results.jsonl", "summary.json", "run.json", "index.html"
#: ``run.json`` fields that must match for ``resume`` (``n`` may grow).
_SAME_RUN_KEYS = ("env", "policy", "seed", "max_turns", "env_config")


class EvalError(Exception):
    """The eval cannot start as asked (bad env, policy, server or output folder)."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """An exception's message on one line (pydantic's multi-line errors included)."""
    lines = [line.strip() for line in str(err).splitlines()]
    text = " ".join(line for line in lines if line and not line.startswith("For further information"))
    return (text or type(err).__name__)[:limit]


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Everything one ``vlm-envs eval`` run needs."""

    env: str
    policy: str
    n: int
    out: Path
    seed: int = 0
    concurrency: int = 8
    max_turns: int | None = None
    resume: bool = False
    report: str = "self-contained"  # or "linked" (see vlm_envs.report.REPORT_MODES)
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: PolicyOptions = dataclasses.field(default_factory=PolicyOptions)

    def run_info(self) -> dict[str, Any]:
        """What ``run.json`` records."""
        return json_safe(
            {
                "env": self.env,
                "policy": self.policy,
                "n": self.n,
                "seed": self.seed,
                "max_turns": self.max_turns,
                "env_config": dict(self.env_config),
                "model": self.options.model,
            }
        )


def make_env(config: EvalConfig) -> Env:
    """One env as the run builds it: ``max_turns`` reaches it as the trainer's ``args.max_turns``."""
    args = types.SimpleNamespace(max_turns=config.max_turns) if config.max_turns is not None else None
    return build_env(config.env, args=args, **dict(config.env_config))


def _record(line: bytes) -> dict[str, Any]:
    """One ``results.jsonl`` line as a record; ``ValueError`` saying why if it is not one."""
    record = json.loads(line)  # JSONDecodeError and UnicodeDecodeError are ValueErrors
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    episode = record.get("episode")
    if type(episode) is not int or episode < 0:
        raise ValueError(f"episode is {episode!r}, not an index")
    return record


def read_results(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The complete records of ``results.jsonl``; with ``repair``, a partial last line is cut off.

    Raises :class:`EvalError` naming the file and line of a complete line that is not a record.
    """
    if not path.exists():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end < len(data):
        with path.open("r+b") as f:
            f.truncate(end)
    records = []
    for number, line in enumerate(data[:end].splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(_record(line))
        except ValueError as err:
            raise EvalError(
                f"{path}:{number}: not an episode record ({one_line(err, 120)}); delete that line "
                "(--resume plays its episode again) or use another --out"
            ) from None
    return records


def recorded_run(out: Path) -> dict[str, Any] | None:
    """The ``run.json`` of the run in ``out``, or ``None`` if there is none."""
    path = out / RUN
    if not path.is_file():
        return None
    try:
        run = json.loads(path.read_bytes())
    except ValueError as err:
        raise EvalError(
            f"{path} is not valid JSON ({one_line(err, 120)}); fix it or use another --out"
        ) from None
    if not isinstance(run, dict):
        raise EvalError(f"{path} holds no run description; fix it or use another --out")
    return run


def _prepare_out(config: EvalConfig, held: contextlib.ExitStack) -> list[dict[str, Any]]:
    """Check, create and lock the output folder; returns the records a resumed run keeps."""
    out = config.out
    if out.exists() and not out.is_dir():
        raise EvalError(f"output path {str(out)!r} is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise EvalError(f"cannot create output folder {str(out)!r}: {err.strerror or err}") from err
    try:
        held.enter_context(folder_lock(out))
    except FolderBusyError as err:
        raise EvalError(
            f"{str(out)!r} is in use by another run ({err}); wait for it, stop it, or use another --out"
        ) from None
    except OSError as err:
        raise EvalError(f"cannot lock {str(out / LOCK_FILE)!r}: {err.strerror or err}") from err
    results = out / RESULTS
    if not config.resume:
        if results.exists() and results.stat().st_size:
            raise EvalError(f"{str(out)!r} already holds results: pass --resume, or choose another --out")
        return []
    before = recorded_run(out)
    if before is not None:
        changed = [k for k in _SAME_RUN_KEYS if before.get(k) != config.run_info().get(k)]
        if changed:
            raise EvalError(
                f"--resume in {str(out)!r}: {', '.join(changed)} differ from the run there ({RUN}); "
                "use the same options or another --out"
            )
    kept = read_results(results, repair=True)
    episodes = {r["episode"] for r in kept}
    if episodes and max(episodes) >= config.n:  # the summary would silently drop recorded episodes
        raise EvalError(
            f"--resume -n {config.n}: {str(out)!r} already records {len(episodes)} episodes (up to "
            f"episode {max(episodes)}); pass -n {max(episodes) + 1} or more (or leave -n out), "
            "or use another --out"
        )
    return kept


def _check(config: EvalConfig, policy: Policy) -> None:
    """Fail early on a bad env, env config or policy/env mismatch."""
    if config.n < 1:
        raise EvalError(f"-n must be at least 1, got {config.n}")
    if config.concurrency < 1:
        raise EvalError(f"--concurrency must be at least 1, got {config.concurrency}")
    if config.max_turns is not None and config.max_turns < 1:
        raise EvalError(f"--max-turns must be at least 1, got {config.max_turns}")
    try:
        env = make_env(config)
    except (UnknownEnvError, EnvLoadError) as err:
        raise EvalError(str(err)) from err
    except (TypeError, ValueError) as err:
        raise EvalError(f"env {config.env!r} rejects its config: {one_line(err)}") from err
    try:
        policy.check_env(env)
    except PolicyError as err:
        raise EvalError(f"{err}; env {config.env!r} has none") from err
    finally:
        env.close()


async def _episode(config: EvalConfig, policy: Policy, index: int) -> EpisodeResult:
    seed = config.seed + index
    env = await asyncio.to_thread(make_env, config)
    try:
        return await policy.play(env, seed, config.max_turns or DEFAULT_MAX_TURNS)
    except Exception as err:  # a policy's or env's bug ends this episode as failed, not the run
        error = f"{type(err).__name__}: {err}"
        return EpisodeResult(seed=seed, status="failed", reward=0.0, turns=[TurnResult(None)], error=error)
    finally:
        env.close()


def _warn_non_finite(config: EvalConfig, result: EpisodeResult, index: int, warned: set[str]) -> None:
    """Say once per metric name and eval that the env reported a non-finite value for it."""
    for name, value in result.non_finite_metrics().items():
        if name not in warned:
            warned.add(name)
            print(
                f"vlm-envs: warning: env {config.env!r} reported metric {name!r} = {value} (episode "
                f"{index}); non-finite values are recorded as null and left out of the summary. "
                "Report finite numbers (this warning is printed once per metric).",
                file=sys.stderr,
            )


async def _run(
    config: EvalConfig, policy: Policy, progress_stream: TextIO | None, held: contextlib.ExitStack
) -> None:
    """Start the policy (so an unreachable server fails before any file is written), then lock the
    folder into ``held`` and play."""
    try:
        await policy.start()
    except PolicyError as err:
        await policy.close()
        raise EvalError(str(err)) from err
    try:
        kept = _prepare_out(config, held)
        (config.out / RUN).write_text(json.dumps(config.run_info(), indent=2) + "\n")
        done = {r["episode"] for r in kept}
        progress = None
        if progress_stream is not None:
            successes = sum(bool(r.get("success")) for r in kept if r.get("episode") in done)
            progress = Progress(config.n, done=len(done), successes=successes, stream=progress_stream)
        sem = asyncio.Semaphore(config.concurrency)
        warned: set[str] = set()

        async def one(index: int, sink: TextIO) -> None:
            async with sem:
                result = await _episode(config, policy, index)
                _warn_non_finite(config, result, index, warned)
                record = await asyncio.to_thread(
                    to_record, result, index, config.out, {"policy": policy.name}
                )
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            sink.flush()
            if progress is not None:
                progress.update(record["success"])

        with (config.out / RESULTS).open("a", encoding="utf-8") as sink:
            await asyncio.gather(*(one(i, sink) for i in range(config.n) if i not in done))
        if progress is not None:
            progress.finish()
    finally:
        await policy.close()


def run_eval(
    config: EvalConfig, policy: Policy | None = None, progress_stream: TextIO | None = None
) -> dict[str, Any]:
    """Run (or resume) the eval and write the summary and report; returns the summary.

    ``policy`` overrides ``config.policy`` (Python use, e.g. an SGLang policy on a processor
    object). Raises :class:`EvalError` for problems the user must fix.
    """
    from vlm_envs.report import write_report  # the report sits on top of eval

    try:
        policy = policy or build_policy(config.policy, config.options)
    except PolicyError as err:
        raise EvalError(str(err)) from err
    _check(config, policy)
    with contextlib.ExitStack() as held:  # the folder stays locked until the report is written
        asyncio.run(_run(config, policy, progress_stream, held))
        latest = {r["episode"]: r for r in read_results(config.out / RESULTS)}
        records = [latest[i] for i in sorted(latest)]
        summary = summarize(records, config.run_info())
        (config.out / SUMMARY).write_text(json.dumps(json_safe(summary), indent=2) + "\n")
        write_report(config.out, records, summary, config.report)
    return summary
