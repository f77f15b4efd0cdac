"""Where demonstrations come from: an env's oracle, or the records of a ``vlm-envs eval`` folder.

A run folder is hostile input (people share them): ``run.json`` may name only a registered env, with
a config that is a JSON object a client may give (no file, folder or hub id the host would read:
:func:`vlm_envs.envs.config.check_client_config`) and a turn cap that is a positive int; JSON nested
past the interpreter's recursion limit is refused, not a traceback; each record is checked before it
is replayed (an int seed, a finite reward, every turn's observation present), nothing is coerced, and
a record that fails is skipped and counted, as is a repeated episode. An env that raises on one seed
is counted with its error and the run goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as md
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vlm_envs.configured import build_configured_env
from vlm_envs.envs.config import ClientConfigError, check_client_config
from vlm_envs.errors import one_line
from vlm_envs.protocol import Env, check_seed
from vlm_envs.registry import get_spec, list_envs
from vlm_envs.sft.demos import Demonstration, DemonstrationError, play_oracle, replay_record

RUN, RESULTS = "run.json", "results.jsonl"


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
        repeated = sorted({e for e in self.envs if self.envs.count(e) > 1})
        if repeated:
            raise SftError(f"{', '.join(repeated)} named twice: name each env once and raise -n instead")
        if self.env_config and len(self.envs) > 1:
            raise SftError("--config applies to one env: make the data of each env with its own config")
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 1:
            raise SftError(f"-n must be a positive int, got {self.n!r}")
        if self.max_turns is not None and (type(self.max_turns) is not int or self.max_turns < 1):
            raise SftError(f"--max-turns must be a positive int, got {self.max_turns!r}")
        try:
            check_seed(self.seed)
            check_seed(self.seed + self.n - 1)
        except (TypeError, ValueError) as err:
            raise SftError(f"--seed: {err}") from None

    @property
    def episodes(self) -> int:
        return self.n * len(self.envs)


@dataclasses.dataclass(frozen=True)
class RunSource:
    """The episodes of a ``vlm-envs eval`` folder with a reward of at least ``min_reward``
    (``None``: its successes)."""

    run_dir: Path
    min_reward: float | None = None

    def __post_init__(self) -> None:
        if self.min_reward is not None and (
            isinstance(self.min_reward, bool) or not math.isfinite(float(self.min_reward))
        ):
            raise SftError(f"--min-reward must be a finite number, got {self.min_reward!r}")


@dataclasses.dataclass
class EnvTally:
    """What one env contributed: its episodes, the kept ones, and what was skipped or failed."""

    version: str | None
    config: dict[str, Any]
    episodes: int = 0
    successes: int = 0
    kept_seeds: list[int] = dataclasses.field(default_factory=list)
    skipped: dict[str, int] = dataclasses.field(default_factory=dict)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)  # seed -> error

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def env_version(env: str) -> str | None:
    """The version of the distribution that registers ``env``, where known."""
    dist = get_spec(env).distribution
    if dist is None:
        return None
    with contextlib.suppress(md.PackageNotFoundError):
        return md.version(dist)
    return None


def oracle_demos(source: OracleSource, tallies: dict[str, EnvTally]) -> Iterator[Demonstration]:
    """Each env's oracle episodes, seed by seed; a seed whose play raises is counted in ``failed``
    (the env is built again for the next seed)."""
    for name in source.envs:
        tally = tallies.setdefault(name, EnvTally(env_version(name), dict(source.env_config)))
        env: Env | None = None
        try:
            for seed in range(source.seed, source.seed + source.n):
                env = env or build_configured_env(name, source.max_turns, source.env_config)
                try:
                    demo = play_oracle(env, name, seed, source.max_turns, source.rationale)
                except Exception as err:  # an env can fail on any seed in any way: counted, not fatal
                    tally.episodes += 1
                    tally.failed[str(seed)] = one_line(err, 240, typed=True)
                    with contextlib.suppress(Exception):
                        env.close()
                    env = None
                    continue
                yield demo
        finally:
            if env is not None:
                env.close()


def read_run(run_dir: Path) -> tuple[str, dict[str, Any], int | None]:
    """The env, config and turn cap of the run in ``run_dir``, each checked (a registered env only)."""
    where = f"{run_dir}/{RUN}"
    if not run_dir.is_dir():
        raise SftError(f"--from {str(run_dir)!r} is not a folder: give a `vlm-envs eval` output folder")
    try:
        run = json.loads((run_dir / RUN).read_bytes())
    except FileNotFoundError:
        raise SftError(f"{run_dir} holds no {RUN}: give a `vlm-envs eval` output folder") from None
    except RecursionError:
        raise SftError(f"{where} is JSON nested too deep to be a run description") from None
    except (OSError, ValueError) as err:
        raise SftError(f"{where} cannot be read as JSON ({one_line(err, 240, typed=True)})") from None
    if not isinstance(run, dict):
        raise SftError(f"{where} holds no run description")
    name = run.get("env")
    registered = sorted(spec.name for spec in list_envs())
    if name not in registered:
        raise SftError(
            f"{where} names env {name!r}, not a registered env ({', '.join(registered)}): "
            "--from replays registered envs only"
        )
    config = run.get("env_config") or {}
    if not isinstance(config, dict):
        raise SftError(f"{where}: env_config is {type(config).__name__}, not an object")
    try:  # the folder is someone else's: its config chooses episodes, never files for this host to read
        check_client_config(get_spec(name).load(), config)
    except ClientConfigError as err:
        raise SftError(f"{where}: {err}") from None
    max_turns = run.get("max_turns")
    if max_turns is not None and (type(max_turns) is not int or max_turns < 1):
        raise SftError(f"{where}: max_turns is {max_turns!r}, not a positive int")
    if not (run_dir / RESULTS).is_file():
        raise SftError(f"{run_dir} holds no {RESULTS} (a run that played no episode?)")
    return name, config, max_turns


def _records(path: Path) -> Iterator[dict[str, Any] | str]:
    """The records of ``results.jsonl`` in episode order, read one at a time (an index of offsets
    first); a line that is not a record, or repeats an episode, comes as a string saying why."""
    index: list[tuple[int, int]] = []  # (episode, offset)
    seen: set[int] = set()
    bad: list[str] = []
    with path.open("rb") as f:
        offset = 0
        for line in f:
            start, offset = offset, offset + len(line)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except RecursionError:
                bad.append("nested too deep")
                continue
            except ValueError:
                bad.append("not JSON")
                continue
            episode = record.get("episode") if isinstance(record, dict) else None
            if type(episode) is not int or episode < 0:
                bad.append("no episode index")
            elif episode in seen:
                bad.append("repeated episode")
            else:
                seen.add(episode)
                index.append((episode, start))
        yield from bad
        for _, start in sorted(index):
            f.seek(start)
            yield json.loads(f.readline())


def _record_problem(record: dict[str, Any]) -> str | None:
    """Why ``record`` cannot be replayed as recorded, or ``None``."""
    if type(record.get("seed")) is not int or record["seed"] < 0:
        return "seed not an int"
    reward = record.get("reward")
    if type(reward) not in (int, float) or not math.isfinite(reward):
        return "reward not a finite number"
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, dict) for t in turns):
        return "no turns"
    for turn in turns:
        obs = turn.get("observation")
        if not isinstance(obs, dict) or not isinstance(obs.get("text"), str):
            return "turn without its observation"
    return None


def run_demos(source: RunSource, tallies: dict[str, EnvTally]) -> Iterator[Demonstration]:
    """The recorded episodes of an eval folder, replayed through the run's env in episode order."""
    name, config, max_turns = read_run(source.run_dir)
    tally = tallies.setdefault(name, EnvTally(env_version(name), config))
    env = build_configured_env(name, max_turns, config)
    try:
        for record in _records(source.run_dir / RESULTS):
            if isinstance(record, str):
                tally.skip(record)
                continue
            if record.get("status") not in ("completed", "truncated"):
                tally.skip(f"status {record.get('status')}")
                continue
            problem = _record_problem(record)
            if problem is not None:
                tally.skip(problem)
                continue
            try:
                demo = replay_record(env, name, record, max_turns)
            except DemonstrationError as err:
                raise SftError(f"episode {record['episode']} of {source.run_dir}: {err}") from None
            except Exception as err:  # the env failed on this episode: counted, the others go on
                tally.episodes += 1
                tally.failed[str(record["seed"])] = one_line(err, 240, typed=True)
                env.close()
                env = build_configured_env(name, max_turns, config)
                continue
            if not math.isclose(demo.reward, record["reward"], rel_tol=0.0, abs_tol=1e-9):
                raise SftError(
                    f"episode {record['episode']} of {source.run_dir}: replayed reward {demo.reward} "
                    f"is not the recorded {record['reward']}"
                )
            yield demo
    finally:
        env.close()


def count_records(run_dir: Path) -> int:
    """How many lines ``results.jsonl`` holds (the progress bar's total)."""
    with (run_dir / RESULTS).open("rb") as f:
        return sum(1 for line in f if line.strip())
