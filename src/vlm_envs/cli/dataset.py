"""``vlm-envs make-dataset``: parquet rows for slime's ``--prompt-data`` (or verl's, or TRL's), and the
YAML (or, for TRL, a training script)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from vlm_envs.cli.common import (
    UsageError,
    add_difficulty_option,
    add_env_options,
    build_env,
    difficulty_levels,
    env_config,
)
from vlm_envs.registry import EnvLoadError, UnknownEnvError

if TYPE_CHECKING:
    from vlm_envs.datasets.on_ray import RayShards

#: ``--ray`` without an address: Ray's own choice (see ``--ray``'s help).
RAY_AUTO = "auto"


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``make-dataset`` command."""
    ds = sub.add_parser(
        "make-dataset", help="parquet rows for slime --prompt-data (or verl, or TRL), and the matching YAML"
    )
    add_env_options(ds)
    ds.add_argument("-n", type=int, required=True, help="number of rows")
    ds.add_argument("--out", required=True, help="parquet file to write (the YAML goes next to it)")
    ds.add_argument(
        "--trainer", choices=("slime", "verl", "trl"), default="slime", help="whose layout (default slime)"
    )
    ds.add_argument(
        "--force", action="store_true", help="replace --out and its YAML if they exist (else it refuses)"
    )
    ds.add_argument(
        "--backend", choices=("fsdp", "megatron"), help="with --trainer verl: verl's trainer (default fsdp)"
    )
    add_difficulty_option(ds, "row")
    ds.add_argument(
        "--ray",
        nargs="?",
        const=RAY_AUTO,
        metavar="ADDRESS",
        help="build the rows on a Ray cluster, sharded by seed (same bytes as without): the cluster "
        "this process is on, else ADDRESS, else RAY_ADDRESS, one started here with `ray start`, or a new "
        "local one (needs vlm-envs[ray])",
    )
    ds.set_defaults(func=run, interrupted=" (no file is left half-written)")


def run(args: argparse.Namespace) -> int:
    """Write slime- or verl-ready parquet rows, the matching YAML, and how to launch a run."""
    from vlm_envs.datasets.build import (
        OutputExistsError,
        RowBuildError,
        check_outputs,
        make_dataset,
        run_here,
    )
    from vlm_envs.errors import one_line
    from vlm_envs.files import OutputError

    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a folder; give a file name such as train.parquet")
    if args.backend is not None and args.trainer != "verl":
        raise UsageError("--backend picks verl's trainer: give it with --trainer verl")
    try:  # before any row is built
        check_outputs(out, args.trainer, args.force)
    except (OutputExistsError, ValueError) as err:
        raise UsageError(str(err)) from err
    config = env_config(args.config)
    levels = difficulty_levels(args.difficulty, args.n, args.seed, config)
    named = [level for level, _ in levels.curriculum.shares] if levels is not None else [None]
    _refuse_client_keys(args.env, config)
    for level in named:  # a config (or a level) the env refuses fails here, once
        leveled = config if level is None else {**config, "difficulty": level}
        build_env(args.env, args.max_turns, leveled).close()
    shards = _ray_shards(args.ray) if args.ray is not None else None
    try:
        files = make_dataset(
            args.env,
            args.n,
            out,
            args.seed,
            args.max_turns,
            config,
            trainer=args.trainer,
            backend=args.backend or "fsdp",
            runner=shards.run if shards is not None else run_here,
            force=args.force,
            levels=levels,
        )
    except (UnknownEnvError, EnvLoadError, OutputExistsError, OutputError) as err:
        raise UsageError(str(err)) from err
    except RowBuildError as err:
        raise UsageError(f"make-dataset {args.env!r} --ray: {err}") from err
    except ModuleNotFoundError as err:
        raise UsageError(f"make-dataset needs the data extra (pip install 'vlm-envs[data]'): {err}") from err
    except (TypeError, ValueError) as err:
        raise UsageError(f"make-dataset {args.env!r}: {one_line(err)}") from err
    if shards is not None:
        print(f"built on Ray: {len(shards.shards)} shards on {len(set(shards.node_ids))} node(s)")
    if args.trainer == "trl":
        print(f"wrote {files.rows} rows to {files.parquet} and a GRPO training script to {files.script}")
        print(f"TRL run: python {files.script}\n\n{files.script_text()}", end="")
        return 0
    if args.trainer == "verl":
        print(f"wrote {files.rows} rows to {files.parquet} and the agent-loop YAML to {files.yaml}")
        print(f"verl ({files.backend}) run:\n  " + files.command())
        return 0
    print(f"wrote {files.rows} rows to {files.parquet} and the slime YAML to {files.yaml}")
    print("slime flags:\n  " + files.slime_flags())
    return 0


def _refuse_client_keys(env: str, config: dict[str, object]) -> None:
    """Rows carry only a config every trainer accepts in a row
    (:func:`vlm_envs.envs.config.check_client_config`): a ``--config`` key naming a file, folder or hub
    id, the trainer's ``sample`` or ``args``, an image by path or deep nesting would be refused by all."""
    from vlm_envs.envs.config import ClientConfigError, check_client_config, location_keys
    from vlm_envs.registry import get_spec

    try:
        spec = get_spec(env)
        target = spec.load()
    except (UnknownEnvError, EnvLoadError) as err:
        raise UsageError(str(err)) from err
    keys = sorted(location_keys(target) & set(config))
    if keys:
        raise UsageError(
            f"--config {keys[0]}=... names a file, folder or hub id, which every trainer refuses in a "
            f"dataset row: configure it with the env instead (an entry point, or vlm_envs.register("
            f"'my_env', {spec.target!r}, {keys[0]}=...) where the episodes play) and make that env's rows"
        )
    try:
        check_client_config(target, config)
    except ClientConfigError as err:
        raise UsageError(f"--config: every trainer refuses this in a dataset row: {err}") from err


def _ray_shards(address: str) -> RayShards:
    """make-dataset's Ray runner (:class:`vlm_envs.datasets.on_ray.RayShards`); ``auto``: see --ray."""
    try:
        from vlm_envs.datasets.on_ray import RayShards
    except ModuleNotFoundError as err:
        raise UsageError(f"--ray needs the ray extra (pip install 'vlm-envs[ray]'): {err}") from err
    return RayShards(None if address == RAY_AUTO else address)
