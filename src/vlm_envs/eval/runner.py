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
import math
import sys
from pathlib import Path
from typing import Any, TextIO

from vlm_envs.configured import EnvConfigError, build_configured_env
from vlm_envs.errors import one_line
from vlm_envs.eval.config import EvalConfig, RayPlacement, make_env
from vlm_envs.eval.episodes import EpisodeRunner, LocalEpisodes
from vlm_envs.eval.lock import LOCK_FILE, FolderBusyError, folder_lock
from vlm_envs.eval.policies import Policy, PolicyError
from vlm_envs.eval.policy_kinds import build_policy, canonical_policy
from vlm_envs.eval.progress import Progress
from vlm_envs.eval.records import write_frames
from vlm_envs.eval.summary import summarize
from vlm_envs.files import OutputError, write_atomic
from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import SEED_LIMIT
from vlm_envs.registry import EnvLoadError, UnknownEnvError

__all__ = [
    "EvalConfig",
    "EvalError",
    "RayPlacement",
    "make_env",
    "read_results",
    "recorded_run",
    "run_eval",
]

RESULTS, SUMMARY, RUN, REPORT = "results.jsonl", "summary.json", "run.json", "index.html"
#: ``run.json`` fields that must match for ``resume`` (``n`` may grow).
_SAME_RUN_KEYS = ("env", "policy", "seed", "max_turns", "env_config", "base_urls", "difficulty")


class EvalError(Exception):
    """The eval cannot start as asked (bad env, policy, server or output folder)."""


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
        before = {**before, "policy": canonical_policy(str(before.get("policy")))}  # run under an old name
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
    if not (config.seed >= 0 and config.seed + config.n <= SEED_LIMIT):
        raise EvalError(f"--seed must keep the episodes' seeds (seed + i) in [0, 2**64), got {config.seed}")
    if config.concurrency < 1:
        raise EvalError(f"--concurrency must be at least 1, got {config.concurrency}")
    if config.max_turns is not None and config.max_turns < 1:
        raise EvalError(f"--max-turns must be at least 1, got {config.max_turns}")
    options = config.options
    if options.max_tokens < 1:
        raise EvalError(f"--max-tokens must be at least 1, got {options.max_tokens}")
    if not options.timeout > 0:  # NaN fails too
        raise EvalError(f"--timeout must be above 0 seconds, got {options.timeout:g}")
    if not (math.isfinite(options.temperature) and options.temperature >= 0):
        raise EvalError(f"--temperature must be a number >= 0, got {options.temperature:g}")
    if config.ray is not None and config.ray.actors is not None and config.ray.actors < 1:
        raise EvalError(f"--actors must be at least 1, got {config.ray.actors}")
    if config.ray is not None and config.ray.actor_cpus < 0:
        raise EvalError(f"--actor-cpus must be at least 0, got {config.ray.actor_cpus:g}")
    try:
        levels = config.levels()
    except ValueError as err:
        raise EvalError(str(err)) from err
    named = [] if levels is None else [level for level, _ in levels.curriculum.shares]
    try:
        for level in named:  # a level the env has no preset for fails here, once
            leveled = {**config.env_config, "difficulty": level}
            build_configured_env(config.env, config.max_turns, leveled).close()
        env = make_env(config)
    except (UnknownEnvError, EnvLoadError, EnvConfigError) as err:
        raise EvalError(str(err)) from err
    try:
        policy.check_env(env)
    except PolicyError as err:
        raise EvalError(f"{err}; env {config.env!r} has none") from err
    finally:
        env.close()


def episode_runner(config: EvalConfig, policy: Policy) -> EpisodeRunner:
    """Where ``config``'s episodes play: Ray actors for ``config.ray``, else this process."""
    if config.ray is None:
        return LocalEpisodes(config, policy)
    try:
        from vlm_envs.eval.ray_episodes import RayEpisodes  # imports ray: only for --ray
    except ImportError as err:
        raise PolicyError(f"--ray needs the ray extra: pip install 'vlm-envs[ray]' ({err})") from err
    return RayEpisodes(config, policy.name)


def _warn_non_finite(config: EvalConfig, non_finite: dict[str, float], index: int, warned: set[str]) -> None:
    """Say once per metric name and eval that the env reported a non-finite value for it."""
    for name, value in non_finite.items():
        if name not in warned:
            warned.add(name)
            print(
                f"vlm-envs: warning: env {config.env!r} reported metric {name!r} = {value} (episode "
                f"{index}); non-finite values are recorded as null and count as 0 in the summary's means. "
                "Report finite numbers (this warning is printed once per metric).",
                file=sys.stderr,
            )


async def _run(
    config: EvalConfig,
    policy: Policy,
    runner: EpisodeRunner,
    progress_stream: TextIO | None,
    held: contextlib.ExitStack,
) -> None:
    """Start the policy and the episode runner (so an unreachable server fails before any file is
    written), then lock the folder into ``held`` and play."""
    try:
        await policy.start()
        await runner.start()
    except PolicyError as err:
        await runner.close()
        await policy.close()
        raise EvalError(str(err)) from err
    try:
        kept = _prepare_out(config, held)
        try:
            write_atomic(config.out / RUN, json.dumps(config.run_info(), indent=2) + "\n")
        except OutputError as err:
            raise EvalError(str(err)) from err
        done = {r["episode"] for r in kept}
        progress = None
        if progress_stream is not None:
            successes = sum(bool(r.get("success")) for r in kept if r.get("episode") in done)
            progress = Progress(config.n, done=len(done), successes=successes, stream=progress_stream)
        warned: set[str] = set()
        # planned as they are played: -n 5000000 made 5 million tasks (6.6 GiB) before the first episode
        todo = (i for i in range(config.n) if i not in done)

        async def player(sink: TextIO) -> None:
            for index in todo:  # the players share one iterator: each index is played once
                finished = await runner.play(index)
                _warn_non_finite(config, finished.non_finite, index, warned)
                record = finished.record
                try:  # a full disk: --resume replays what is not on a complete line
                    await asyncio.to_thread(write_frames, config.out, finished.frames)
                    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
                    sink.flush()
                except OSError as err:
                    raise EvalError(
                        f"cannot write episode {index} in {str(config.out)!r}: {err.strerror or err}"
                    ) from err
                if progress is not None:
                    progress.update(record["success"])

        with (config.out / RESULTS).open("a", encoding="utf-8") as sink:
            await asyncio.gather(*(player(sink) for _ in range(min(config.concurrency, config.n))))
        if progress is not None:
            progress.finish()
    except asyncio.CancelledError:  # Ctrl-C: what the episodes cut short still finish is not an error
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
        raise
    finally:
        await runner.close()
        await policy.close()


def run_eval(
    config: EvalConfig, policy: Policy | None = None, progress_stream: TextIO | None = None
) -> dict[str, Any]:
    """Run (or resume) the eval and write the summary and report; returns the summary.

    ``policy`` overrides ``config.policy`` (Python use, e.g. an SGLang policy on a processor
    object). Raises :class:`EvalError` for problems the user must fix.
    """
    from vlm_envs.report import write_report  # the report sits on top of eval

    config = dataclasses.replace(config, policy=canonical_policy(config.policy))
    if policy is not None and config.ray is not None:
        raise EvalError("with Ray, actors build the policy from config.policy and config.options: pass none")
    try:
        policy = policy or build_policy(config.policy, config.options)
    except PolicyError as err:
        raise EvalError(str(err)) from err
    _check(config, policy)
    try:
        runner = episode_runner(config, policy)
    except PolicyError as err:
        raise EvalError(str(err)) from err
    with contextlib.ExitStack() as held:  # the folder stays locked until the report is written
        asyncio.run(_run(config, policy, runner, progress_stream, held))
        latest = {r["episode"]: r for r in read_results(config.out / RESULTS)}
        records = [latest[i] for i in sorted(latest)]
        summary = summarize(records, config.run_info())
        try:
            write_atomic(config.out / SUMMARY, json.dumps(json_safe(summary), indent=2) + "\n")
            write_report(config.out, records, summary, config.report)
        except OutputError as err:
            raise EvalError(str(err)) from err
    return summary
