"""``vlm-envs make-sft``: SFT demonstrations from an env's oracle or an eval run's winning episodes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlm_envs.cli.common import DEFAULT_EPISODES, UsageError, build_env, env_config
from vlm_envs.registry import EnvLoadError, UnknownEnvError


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``make-sft`` command."""
    sft = sub.add_parser(
        "make-sft", help="SFT demonstrations: an env's oracle, or the winning episodes of an eval run"
    )
    sft.add_argument("env", nargs="*", help="env names to play the oracle of (none with --from)")
    sft.add_argument("-n", type=int, default=None, help=f"seeds per env (default {DEFAULT_EPISODES})")
    sft.add_argument("--seed", type=int, default=None, help="first seed (default 0)")
    sft.add_argument(
        "--max-turns", type=int, default=None, help="turn cap, given to the env as args.max_turns"
    )
    sft.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="env config (JSON values; one env)"
    )
    sft.add_argument("--from", dest="from_run", metavar="RUN_DIR", help="a `vlm-envs eval` output folder")
    sft.add_argument(
        "--min-reward",
        type=float,
        default=None,
        help="with --from: keep episodes with at least this reward (default: the successes)",
    )
    sft.add_argument("--out", required=True, help="the folder to write (refused if not empty, see --force)")
    sft.add_argument(
        "--format",
        default="trl",
        choices=("trl", "llamafactory", "sharegpt", "swift"),
        help="trl (parquet, default), llamafactory (ShareGPT JSON; sharegpt: the same), swift (JSONL)",
    )
    sft.add_argument(
        "--model",
        metavar="NAME_OR_DIR",
        help="with --format trl: refuse a model whose chat template TRL cannot mask for whole conversations",
    )
    sft.add_argument(
        "--history", default="full", help="full (one conversation per episode) or window:K (one per turn)"
    )
    sft.add_argument("--rationale", action="store_true", help="explain each oracle reply first (<think>)")
    sft.add_argument(
        "--force", action="store_true", help="replace an --out that earlier make-sft output fills"
    )
    sft.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write SFT demonstrations (oracle play or an eval run's episodes) and say how to train on them."""
    from vlm_envs.errors import one_line

    try:
        from vlm_envs.sft import FormatError, OracleSource, RunSource, SftError, make_sft
        from vlm_envs.sft.command import ProgressBar, summary
    except ImportError as err:  # the core install: demonstrations are rendered by the model's template
        raise UsageError(
            f"make-sft needs the rollout and data extras (pip install 'vlm-envs[rollout,data]'): {err}"
        ) from err

    if args.from_run is not None and (args.env or args.config or args.rationale):
        raise UsageError("--from replays a run's own env and replies: give no ENV, --config or --rationale")
    if args.from_run is not None and (
        args.n is not None or args.seed is not None or args.max_turns is not None
    ):
        raise UsageError(
            "--from replays the run's own episodes, seeds and turn cap: give no -n, --seed or --max-turns"
        )
    if args.from_run is None and args.min_reward is not None:
        raise UsageError("--min-reward filters the episodes of --from RUN_DIR; oracle play keeps its wins")
    bar = ProgressBar() if sys.stderr.isatty() else None
    try:
        if args.from_run is not None:
            source: OracleSource | RunSource = RunSource(Path(args.from_run), args.min_reward)
        else:
            config = env_config(args.config)
            n = DEFAULT_EPISODES if args.n is None else args.n
            seed = 0 if args.seed is None else args.seed
            source = OracleSource(tuple(args.env), n, seed, args.max_turns, config, rationale=args.rationale)
            for name in args.env:
                build_env(name, args.max_turns, config).close()  # a refused config fails here, once
        files = make_sft(
            source,
            args.out,
            fmt=args.format,
            history=args.history,
            force=args.force,
            progress=bar,
            model=args.model,
        )
    except (SftError, FormatError, UnknownEnvError, EnvLoadError) as err:
        raise UsageError(f"make-sft: {one_line(err)}") from err
    except (TypeError, ValueError) as err:  # an env that fails on its own config or seeds
        raise UsageError(f"make-sft: {one_line(err)}") from err
    finally:
        if bar is not None:
            bar.close()
    print(summary(files))
    for warning in files.warnings:
        print(f"make-sft: warning: {warning}", file=sys.stderr)
    if files.failed:
        print(
            f"make-sft: {files.failed} episodes failed (their envs raised); {files.out / 'manifest.json'} "
            "lists them under envs.*.failed",
            file=sys.stderr,
        )
        return 1
    return 0
