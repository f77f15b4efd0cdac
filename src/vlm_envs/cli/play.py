"""``vlm-envs play``: play an env in the terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vlm_envs.cli.common import UsageError, add_env_options, build_env, env_config


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``play`` command."""
    play = sub.add_parser("play", help="play an env in the terminal")
    add_env_options(play)
    play.add_argument("--save-frames", metavar="DIR", help="save every observation image as PNG in DIR")
    play.add_argument("--wrap", metavar="TAG", help="wrap each typed line in <TAG>...</TAG> (e.g. answer)")
    play.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Play an env in the terminal."""
    from vlm_envs.eval.play import PlaySession
    from vlm_envs.protocol import SEED_LIMIT

    if not 0 <= args.seed < SEED_LIMIT:
        raise UsageError(f"--seed must be in [0, 2**64), got {args.seed}")
    env = build_env(args.env, args.max_turns, env_config(args.config))
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
