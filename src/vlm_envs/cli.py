"""The ``vlm-envs`` command: ``list``, ``check``, ``play``, ``eval``, ``make-dataset`` and ``make-sft``.

Problems the user must fix (unknown env or policy, unreachable server, bad output path, bad
config) end with one ``vlm-envs: error: ...`` line on stderr and exit code 2, no traceback. An
eval in which every episode FAILED exits 1 (see :data:`EVAL_EPILOG`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from vlm_envs.registry import EnvLoadError, UnknownEnvError, list_envs

if TYPE_CHECKING:
    from vlm_envs.eval.ray_dataset import RayShards

USAGE_ERROR = 2
#: ``eval`` exit code when every episode ended FAILED: the run measured nothing.
ALL_FAILED = 1
#: Exit code after Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
#: ``check`` exit code when the env failed a check.
CHECK_FAILED = 1
DEFAULT_EPISODES = 32
#: ``--ray`` without an address: Ray's own choice (see ``--ray``'s help).
RAY_AUTO = "auto"
EVAL_EPILOG = """\
exit status: 0 when the eval ran (episodes that FAILED are counted on a FAILED: line of the
summary); 1 when every episode FAILED (summary and report are still written); 2 for a problem to
fix before it can run (bad env, policy or options, unreachable server or tokenizer, an output folder
in use by another run, a corrupt results.jsonl, or --resume -n below the episodes already recorded);
130 when interrupted. --resume without -n continues to the n the run in --out was started with.
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vlm-envs")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


class UsageError(Exception):
    """A problem with what the user asked for; reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def _env_config(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a config dict; a value is JSON where it parses, else a string."""
    config: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--config takes KEY=VALUE, got {pair!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    return config


def cmd_list(args: argparse.Namespace) -> int:
    """Print every registered env with its description and source distribution."""
    specs = list_envs()
    rows = []
    for spec in specs:
        try:
            description = spec.describe()
        except EnvLoadError as err:
            description = f"(cannot load: {err})"
        rows.append((spec.name, description, spec.distribution or "(registered at run time)"))
    name_width = max((len(r[0]) for r in rows), default=4)
    text_width = max((len(r[1]) for r in rows), default=0)
    for name, description, dist in rows:
        print(f"{name:<{name_width}}  {description:<{text_width}}  [{dist}]")
    return 0


def _build_env(name: str, max_turns: int | None, config: dict[str, Any]) -> Any:
    """The env as the command line asks for it; :class:`UsageError` saying why it cannot be built."""
    from vlm_envs.eval.config import EnvConfigError, build_configured_env

    try:
        return build_configured_env(name, max_turns, config)
    except (UnknownEnvError, EnvLoadError, EnvConfigError) as err:
        raise UsageError(str(err)) from err


def cmd_play(args: argparse.Namespace) -> int:
    """Play an env in the terminal."""
    from vlm_envs.eval.play import PlaySession
    from vlm_envs.protocol import SEED_LIMIT

    if not 0 <= args.seed < SEED_LIMIT:
        raise UsageError(f"--seed must be in [0, 2**64), got {args.seed}")
    env = _build_env(args.env, args.max_turns, _env_config(args.config))
    frames = Path(args.save_frames) if args.save_frames else None
    if frames is not None and frames.exists() and not frames.is_dir():
        raise UsageError(f"--save-frames path {str(frames)!r} is a file, not a folder")
    try:
        if frames is not None:
            frames.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        env.close()
        raise UsageError(f"cannot write frames to {str(frames)!r}: {err.strerror or err}") from err
    try:
        PlaySession(env, sys.stdin, sys.stdout, frames, args.wrap).run(args.seed)
    finally:
        env.close()
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate a policy on an env and write results, summary and report."""
    from vlm_envs.eval.policies import PolicyOptions
    from vlm_envs.eval.policy_kinds import canonical_policy
    from vlm_envs.eval.runner import EvalConfig, EvalError, RayPlacement, recorded_run, run_eval

    if args.ray is None and (args.actors is not None or args.actor_cpus is not None):
        raise UsageError("--actors and --actor-cpus place episodes on Ray actors: give them with --ray")
    ray = None
    if args.ray is not None:
        cpus = 1.0 if args.actor_cpus is None else args.actor_cpus
        ray = RayPlacement(actors=args.actors, address=args.ray or None, actor_cpus=cpus)

    policy = canonical_policy(args.policy)
    kind = policy.partition(":")[0]
    out = Path(args.out) if args.out else Path("runs") / f"{args.env}-{kind}"
    n = args.n
    if n is None:  # a resumed run continues to the n it was started with
        try:
            before = recorded_run(out) if args.resume else None
        except EvalError as err:
            raise UsageError(str(err)) from err
        recorded_n = (before or {}).get("n")
        n = recorded_n if type(recorded_n) is int else DEFAULT_EPISODES
    options = PolicyOptions(
        model=args.model,
        tokenizer=args.tokenizer,
        api_key=args.api_key or os.environ.get("OPENAI_API_KEY"),
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        tools=args.tools,
        timeout=args.timeout,
        read_timeout=args.read_timeout,
        turn_timeout=args.turn_timeout,
        history=args.history,
        base_urls=tuple(args.base_url),
    )
    config = EvalConfig(
        env=args.env,
        policy=policy,
        n=n,
        out=out,
        seed=args.seed,
        concurrency=args.concurrency,
        max_turns=args.max_turns,
        resume=args.resume,
        report=args.report,
        env_config=_env_config(args.config),
        options=options,
        ray=ray,
    )
    try:
        summary = run_eval(config, progress_stream=None if args.quiet else sys.stderr)
    except EvalError as err:
        raise UsageError(str(err)) from err
    rate, (low, high) = summary["success_rate"], summary["success_ci95"]
    print(
        f"{args.env} / {policy}: {summary['episodes']} episodes, success {rate:.1%} "
        f"(95% CI {low:.1%}-{high:.1%}), mean reward {summary['mean_reward']:.3f}, "
        f"mean turns {summary['mean_turns']:.2f}"
    )
    if summary["failed"]:
        first_error = " ".join(str(summary["first_error"]).split())[:300]
        print(f"FAILED: {summary['failed']} of {summary['episodes']} episodes (first error: {first_error})")
    print(f"report: {(out / 'index.html').resolve()}")
    if policy != args.policy:  # after the run: a bad command line still gets its one error line
        print(f"vlm-envs: note: --policy {args.policy} is an old name of --policy {policy}", file=sys.stderr)
    return ALL_FAILED if 0 < summary["failed"] == summary["episodes"] else 0


def cmd_make_dataset(args: argparse.Namespace) -> int:
    """Write slime- or verl-ready parquet rows, the matching YAML, and how to launch a run."""
    from vlm_envs.eval.datasets import OutputExistsError, RowBuildError, check_outputs, make_dataset, run_here
    from vlm_envs.eval.runner import one_line
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
    config = _env_config(args.config)
    _build_env(args.env, args.max_turns, config).close()  # a config the env refuses fails here, once
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
    if args.trainer == "verl":
        print(f"wrote {files.rows} rows to {files.parquet} and the agent-loop YAML to {files.yaml}")
        print(f"verl ({files.backend}) run:\n  " + files.command())
        return 0
    print(f"wrote {files.rows} rows to {files.parquet} and the slime YAML to {files.yaml}")
    print("slime flags:\n  " + files.slime_flags())
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``check_env`` on an env: what passed on one line, or every failure and exit code 1."""
    from vlm_envs.checker import EnvCheckError, check_env

    env = _build_env(args.env, args.max_turns, _env_config(args.config))
    try:
        passed = check_env(env, args.seed, rebuild=not args.no_rebuild)
    except EnvCheckError as err:
        print(f"vlm-envs: check: {err}", file=sys.stderr)
        return CHECK_FAILED
    finally:
        env.close()
    print(f"{args.env}: passed {len(passed)} checks: {', '.join(passed)}")
    return 0


def cmd_make_sft(args: argparse.Namespace) -> int:
    """Write SFT demonstrations (oracle play or an eval run's episodes) and say how to train on them."""
    from vlm_envs.eval.runner import one_line
    from vlm_envs.sft import FormatError, OracleSource, RunSource, SftError, make_sft
    from vlm_envs.sft.command import summary

    if args.from_run is not None and (args.env or args.config or args.rationale):
        raise UsageError("--from replays a run's own env and replies: give no ENV, --config or --rationale")
    if args.from_run is None and args.min_reward is not None:
        raise UsageError("--min-reward filters the episodes of --from RUN_DIR; oracle play keeps its wins")
    try:
        if args.from_run is not None:
            source: OracleSource | RunSource = RunSource(Path(args.from_run), args.min_reward)
        else:
            config = _env_config(args.config)
            source = OracleSource(
                tuple(args.env), args.n, args.seed, args.max_turns, config, rationale=args.rationale
            )
            for name in args.env:
                _build_env(name, args.max_turns, config).close()  # a refused config fails here, once
        files = make_sft(source, args.out, fmt=args.format, history=args.history, force=args.force)
    except (SftError, FormatError, UnknownEnvError, EnvLoadError) as err:
        raise UsageError(f"make-sft: {one_line(err)}") from err
    except (TypeError, ValueError) as err:  # an env that fails on its own config or seeds
        raise UsageError(f"make-sft: {one_line(err)}") from err
    print(summary(files))
    return 0


def _ray_shards(address: str) -> RayShards:
    """make-dataset's Ray runner (:class:`vlm_envs.eval.ray_dataset.RayShards`); ``auto``: see --ray."""
    try:
        from vlm_envs.eval.ray_dataset import RayShards
    except ModuleNotFoundError as err:
        raise UsageError(f"--ray needs the ray extra (pip install 'vlm-envs[ray]'): {err}") from err
    return RayShards(None if address == RAY_AUTO else address)


def build_parser() -> argparse.ArgumentParser:
    """The ``vlm-envs`` argument parser."""
    parser = _Parser(prog="vlm-envs", description="Multi-turn vision-language RL environments.")
    parser.set_defaults(interrupted="")  # what a command adds to "vlm-envs: interrupted" after Ctrl-C
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="registered envs with their description and source").set_defaults(
        func=cmd_list
    )

    def env_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("env", help="an env name (see `vlm-envs list`) or a module path")
        p.add_argument("--seed", type=int, default=0, help="seed of the (first) episode (default 0)")
        p.add_argument(
            "--max-turns", type=int, default=None, help="turn cap, given to the env as args.max_turns"
        )
        p.add_argument(
            "--config", action="append", default=[], metavar="KEY=VALUE", help="env config (JSON values)"
        )

    check = sub.add_parser("check", help="run check_env, the conformance suite, on an env")
    env_options(check)
    check.add_argument("--no-rebuild", action="store_true", help="skip rebuilding the env in another process")
    check.set_defaults(func=cmd_check)

    play = sub.add_parser("play", help="play an env in the terminal")
    env_options(play)
    play.add_argument("--save-frames", metavar="DIR", help="save every observation image as PNG in DIR")
    play.add_argument("--wrap", metavar="TAG", help="wrap each typed line in <TAG>...</TAG> (e.g. answer)")
    play.set_defaults(func=cmd_play)

    ev = sub.add_parser(
        "eval",
        help="evaluate a policy on an env; writes results, summary and an HTML report",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    env_options(ev)
    ev.add_argument(
        "--policy",
        required=True,
        help="oracle | random | openai:URL | sglang:URL | openai | sglang (these two with --base-url); "
        "oracle plays the env's oracle_response() (solver and reference are its old names)",
    )
    ev.add_argument(
        "--base-url",
        action="append",
        default=[],
        metavar="URL",
        help="a server of --policy openai or sglang; repeat it to balance requests over several "
        "(each request goes to the one with the fewest in flight)",
    )
    ev.add_argument(
        "-n",
        type=int,
        default=None,
        help=f"number of episodes (default {DEFAULT_EPISODES}; with --resume, the n of the run in --out)",
    )
    ev.add_argument("--concurrency", type=int, default=8, help="episodes at a time (default 8)")
    ev.add_argument("--out", help="output folder (default runs/ENV-POLICY)")
    ev.add_argument("--resume", action="store_true", help="play only the episodes missing from --out")
    ev.add_argument("--model", help="model name for openai:BASE_URL")
    ev.add_argument("--tokenizer", help="processor/tokenizer path for sglang:URL")
    ev.add_argument("--api-key", help="API key for openai:BASE_URL (default $OPENAI_API_KEY)")
    ev.add_argument("--temperature", type=float, default=0.0)
    ev.add_argument("--max-tokens", type=int, default=1024, help="generated tokens per turn")
    ev.add_argument("--tools", action="store_true", help="send the env's tools() to the openai server")
    ev.add_argument("--timeout", type=float, default=300.0, help="seconds per model request")
    ev.add_argument(
        "--read-timeout", type=float, default=60.0, help="sglang:URL: seconds a reply may make no progress"
    )
    ev.add_argument(
        "--turn-timeout", type=float, default=300.0, help="sglang:URL: seconds per turn, retries included"
    )
    ev.add_argument(
        "--history",
        default="full",
        help="sglang:URL: what the model sees of past turns, 'full' or 'window:K' (the task, the last K "
        "turns and the current observation), as in training (default full)",
    )
    ev.add_argument(
        "--report",
        choices=["self-contained", "linked"],
        default="self-contained",
        help="index.html with the frames embedded (default; the file alone can be shared) or linked "
        "to frames/ (a smaller page for big runs)",
    )
    ev.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play episodes on Ray actors: the cluster this process is connected to, else ADDRESS, "
        "else a local one (needs the ray extra)",
    )
    ev.add_argument(
        "--actors", type=int, default=None, help="with --ray: actors (default: as many as the cluster's CPUs)"
    )
    ev.add_argument("--actor-cpus", type=float, default=None, help="with --ray: CPUs per actor (default 1)")
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=cmd_eval, interrupted=" (eval --resume continues where it stopped)")

    ds = sub.add_parser(
        "make-dataset", help="parquet rows for slime --prompt-data (or verl), and the matching YAML"
    )
    env_options(ds)
    ds.add_argument("-n", type=int, required=True, help="number of rows")
    ds.add_argument("--out", required=True, help="parquet file to write (the YAML goes next to it)")
    ds.add_argument(
        "--trainer", choices=("slime", "verl"), default="slime", help="whose layout (default slime)"
    )
    ds.add_argument(
        "--force", action="store_true", help="replace --out and its YAML if they exist (else it refuses)"
    )
    ds.add_argument(
        "--backend", choices=("fsdp", "megatron"), help="with --trainer verl: verl's trainer (default fsdp)"
    )
    ds.add_argument(
        "--ray",
        nargs="?",
        const=RAY_AUTO,
        metavar="ADDRESS",
        help="build the rows on a Ray cluster, sharded by seed (same bytes as without): the cluster "
        "this process is on, else ADDRESS, else RAY_ADDRESS, one started here with `ray start`, or a new "
        "local one (needs vlm-envs[ray])",
    )
    ds.set_defaults(func=cmd_make_dataset, interrupted=" (no file is left half-written)")

    sft = sub.add_parser(
        "make-sft", help="SFT demonstrations: an env's oracle, or the winning episodes of an eval run"
    )
    sft.add_argument("env", nargs="*", help="env names to play the oracle of (none with --from)")
    sft.add_argument("-n", type=int, default=DEFAULT_EPISODES, help="seeds per env (default 32)")
    sft.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
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
        help="trl (parquet, default), llamafactory / sharegpt (ShareGPT JSON), swift (ms-swift JSONL)",
    )
    sft.add_argument(
        "--history", default="full", help="full (one conversation per episode) or window:K (one per turn)"
    )
    sft.add_argument("--rationale", action="store_true", help="explain each oracle reply first (<think>)")
    sft.add_argument("--force", action="store_true", help="replace a non-empty --out")
    sft.set_defaults(func=cmd_make_sft)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vlm-envs`` console script."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as err:
        print(f"vlm-envs: error: {err}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt:
        print(f"vlm-envs: interrupted{args.interrupted}", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
