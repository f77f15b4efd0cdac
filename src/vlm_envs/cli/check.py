"""``vlm-envs check``: ``check_env``, the conformance suite, on one env."""

from __future__ import annotations

import argparse
import sys

from vlm_envs.cli.common import add_env_options, build_env, env_config

#: Exit code when the env failed a check.
CHECK_FAILED = 1


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``check`` command."""
    check = sub.add_parser("check", help="run check_env, the conformance suite, on an env")
    add_env_options(check)
    check.add_argument(
        "--no-rebuild",
        action="store_true",
        help="skip rebuilding the env in another process (snapshots are then restored in this one)",
    )
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``check_env`` on an env: what passed on one line, or every failure and exit code 1."""
    from vlm_envs.checker import EnvCheckError, check_env

    env = build_env(args.env, args.max_turns, env_config(args.config))
    try:
        passed = check_env(env, args.seed, rebuild=not args.no_rebuild)
    except EnvCheckError as err:
        print(f"vlm-envs: check: {err}", file=sys.stderr)
        return CHECK_FAILED
    finally:
        env.close()
    print(f"{args.env}: passed {len(passed)} checks: {', '.join(passed)}")
    return 0
