"""``vlm-envs eval``: evaluate a policy on an env; writes results, summary and an HTML report."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vlm_envs.cli.common import (
    DEFAULT_EPISODES,
    UsageError,
    add_difficulty_option,
    add_env_options,
    env_config,
)

#: The env module that plays an env on a server (``--env-url``).
REMOTE_ENV = "vlm_envs.remote"
#: Exit code when every episode ended FAILED: the run measured nothing.
ALL_FAILED = 1
EVAL_EPILOG = """\
exit status: 0 when the eval ran (episodes that FAILED are counted on a FAILED: line of the
summary); 1 when every episode FAILED (summary and report are still written); 2 for a problem to
fix before it can run (bad env, policy or options, unreachable server or tokenizer, an output folder
in use by another run, a corrupt results.jsonl, or --resume -n below the episodes already recorded);
130 when interrupted. --resume without -n continues to the n the run in --out was started with.

limits (every wait has a deadline; set them with these options): openai: --timeout (default 300 s)
per request, retried up to 4 times on a timeout, a connection error, 5xx, 408, 409 or 429 (backoff
0.5 s doubling to 16 s), so a server that never answers costs at most about 5 x --timeout per turn.
sglang and vllm: --read-timeout (default 60 s) without progress fails one attempt, --turn-timeout
(default 300 s) bounds the whole turn, retries included: a stalled server costs about
--turn-timeout per turn. Every server must answer a first request within 10 s before the run starts.
No client follows an HTTP redirect.
"""


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``eval`` command."""
    ev = sub.add_parser(
        "eval",
        help="evaluate a policy on an env; writes results, summary and an HTML report",
        epilog=EVAL_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_env_options(ev)
    ev.add_argument(
        "--policy",
        required=True,
        help="oracle | random | openai:URL | sglang:URL | vllm:URL | openai | sglang | vllm (these three "
        "with --base-url); "
        "oracle plays the env's oracle_response() (solver and reference are its old names)",
    )
    ev.add_argument(
        "--base-url",
        action="append",
        default=[],
        metavar="URL",
        help="a server of --policy openai, sglang or vllm; repeat it to balance requests over several "
        "(each request goes to the one with the fewest in flight)",
    )
    ev.add_argument(
        "-n",
        type=int,
        default=None,
        help=f"number of episodes (default {DEFAULT_EPISODES}; with --resume, the n of the run in --out)",
    )
    add_difficulty_option(ev, "episode")
    ev.add_argument("--concurrency", type=int, default=8, help="episodes at a time (default 8)")
    ev.add_argument("--out", help="output folder (default runs/ENV-POLICY)")
    ev.add_argument("--resume", action="store_true", help="play only the episodes missing from --out")
    ev.add_argument("--model", help="model name for openai:BASE_URL")
    ev.add_argument("--tokenizer", help="processor/tokenizer path for sglang:URL and vllm:URL")
    ev.add_argument("--api-key", help="API key for openai:BASE_URL (default $OPENAI_API_KEY)")
    ev.add_argument("--temperature", type=float, default=0.0)
    ev.add_argument("--max-tokens", type=int, default=1024, help="generated tokens per turn")
    ev.add_argument("--tools", action="store_true", help="send the env's tools() to the openai server")
    ev.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="openai: seconds per request (default 300; see limits below)",
    )
    ev.add_argument(
        "--read-timeout",
        type=float,
        default=60.0,
        help="sglang/vllm: seconds a reply may make no progress (default 60)",
    )
    ev.add_argument(
        "--turn-timeout",
        type=float,
        default=300.0,
        help="sglang/vllm: seconds per turn, retries included (default 300)",
    )
    ev.add_argument(
        "--history",
        default="full",
        help="sglang/vllm: what the model sees of past turns, 'full' or 'window:K' (the task, the last K "
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
    ev.add_argument(
        "--env-url",
        action="append",
        default=[],
        metavar="URL",
        help="play the env on a `vlm-envs serve` server (vlm_envs.remote.RemoteEnv); repeat it to spread "
        "episodes over several (round robin); the token comes from $VLM_ENVS_SERVE_TOKEN",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress bar")
    ev.set_defaults(func=run, interrupted=" (eval --resume continues where it stopped)")


def remote_config(args: argparse.Namespace, config: dict) -> dict:
    """The env config as given, or (``--env-url``) RemoteEnv's: the servers, the env, then its config."""
    return {"url": args.env_url, "env": args.env, **config} if args.env_url else config


def run(args: argparse.Namespace) -> int:
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
        env=REMOTE_ENV if args.env_url else args.env,
        policy=policy,
        n=n,
        out=out,
        seed=args.seed,
        concurrency=args.concurrency,
        max_turns=args.max_turns,
        resume=args.resume,
        report=args.report,
        env_config=remote_config(args, env_config(args.config)),
        options=options,
        ray=ray,
        difficulty=args.difficulty,
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
    levels = summary.get("by_difficulty") or {}
    if levels:
        shown = (f"{level} {v['success_rate']:.1%} of {v['episodes']}" for level, v in levels.items())
        print("success by difficulty: " + ", ".join(shown))
    if summary["failed"]:
        first_error = " ".join(str(summary["first_error"]).split())[:300]
        print(f"FAILED: {summary['failed']} of {summary['episodes']} episodes (first error: {first_error})")
    print(f"report: {(out / 'index.html').resolve()}")
    if policy != args.policy:  # after the run: a bad command line still gets its one error line
        print(f"vlm-envs: note: --policy {args.policy} is an old name of --policy {policy}", file=sys.stderr)
    return ALL_FAILED if 0 < summary["failed"] == summary["episodes"] else 0
