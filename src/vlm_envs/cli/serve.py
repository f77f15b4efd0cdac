"""``vlm-envs serve``: envs behind OpenEnv's HTTP/WebSocket protocol (see docs/serve.md)."""

from __future__ import annotations

import argparse
import os

from vlm_envs.cli.common import UsageError

SERVE_EPILOG = """\
Sessions: a WebSocket to /ws is one session (OpenEnv's client); over HTTP, POST /reset answers
metadata.session_id and /step, /state and /close send it back as "session_id". Binding anything but
loopback needs a bearer token (--token or $VLM_ENVS_SERVE_TOKEN). SIGTERM or Ctrl-C lets the calls in
flight finish, then exits.
"""


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``serve`` command."""
    sv = sub.add_parser(
        "serve",
        help="serve envs over OpenEnv's HTTP/WebSocket protocol",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sv.add_argument("envs", nargs="*", metavar="ENV", help="envs to serve (default: every registered env)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    sv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    sv.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="env worker processes (default: one per CPU; the server's loop needs far less than a worker)",
    )
    sv.add_argument("--max-sessions", type=int, default=4096, help="sessions at once (default 4096)")
    sv.add_argument(
        "--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed (600)"
    )
    sv.add_argument("--token", help="bearer token every request must carry (default $VLM_ENVS_SERVE_TOKEN)")
    sv.add_argument(
        "--max-body", type=int, default=1 << 20, help="largest request body or message in bytes (1 MiB)"
    )
    sv.set_defaults(func=run, interrupted="")


def run(args: argparse.Namespace) -> int:
    """Start the server; returns once it has drained and stopped."""
    try:
        from vlm_envs.serve.config import ServeConfig, ServeConfigError, token_from_env
        from vlm_envs.serve.server import run as serve
    except ImportError as err:
        raise UsageError(
            f"vlm-envs serve needs the serve extra: pip install 'vlm-envs[serve]' ({err})"
        ) from err
    try:
        config = ServeConfig(
            envs=tuple(args.envs),
            host=args.host,
            port=args.port,
            workers=args.workers,
            max_sessions=args.max_sessions,
            idle_timeout_s=args.idle_timeout,
            token=token_from_env(args.token),
            max_body_bytes=args.max_body,
        )
        config.served()  # an unknown env is the user's to fix, before anything starts
    except ServeConfigError as err:
        raise UsageError(str(err)) from err
    print(
        f"vlm-envs serve: {', '.join(sorted(config.served()))} on http://{args.host}:{args.port}", flush=True
    )
    serve(config)
    return 0
