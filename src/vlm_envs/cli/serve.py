"""``vlm-envs serve``: envs behind OpenEnv's HTTP/WebSocket protocol (see docs/serve.md)."""

from __future__ import annotations

import argparse
import math
import os

from vlm_envs.cli.common import UsageError
from vlm_envs.serve.config import (
    DEFAULT_SESSION_MEMORY_CAP_MIB,
    DEFAULT_WORKER_MEMORY_CAP_MIB,
    ServeConfig,
    ServeConfigError,
    token_from_env,
)

#: The shortest idle timeout taken (seconds): the idle reaper looks every quarter of it.
MIN_IDLE_TIMEOUT_S = 1.0

SERVE_EPILOG = """\
Sessions: a WebSocket to /ws is one session (OpenEnv's client); over HTTP, POST /reset answers
metadata.session_id and /step, /state and /close send it back as "session_id". Binding anything but
loopback needs a bearer token (--token or $VLM_ENVS_SERVE_TOKEN); GET /health answers without it (status
and counts), GET /metrics (Prometheus' text format) with it. SIGTERM or Ctrl-C lets the calls in flight
finish, then exits.
"""


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``serve`` command."""
    sv = sub.add_parser(
        "serve",
        help="serve envs over OpenEnv's HTTP/WebSocket protocol",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = ServeConfig  # the defaults
    sv.add_argument("envs", nargs="*", metavar="ENV", help="envs to serve (default: every registered env)")
    sv.add_argument("--host", default=d.host, help=f"address to bind (default {d.host})")
    sv.add_argument(
        "--port",
        metavar="PORT",
        type=port,
        default=d.port,
        help=f"port, 0 for any free one (default {d.port})",
    )
    sv.add_argument(
        "--workers",
        metavar="N",
        type=workers,
        default=os.cpu_count() or 1,
        help="env worker processes, at most 4 per CPU (default: one per CPU; the server's loop needs far "
        "less than a worker)",
    )
    sv.add_argument(
        "--max-sessions",
        metavar="N",
        type=at_least_1,
        default=d.max_sessions,
        help=f"sessions at once ({d.max_sessions})",
    )
    sv.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=idle_seconds,
        default=d.idle_timeout_s,
        help=f"seconds before an idle session is closed, >= {MIN_IDLE_TIMEOUT_S:g} ({d.idle_timeout_s:g})",
    )
    sv.add_argument("--token", help="bearer token every request must carry (default $VLM_ENVS_SERVE_TOKEN)")
    sv.add_argument(
        "--max-body",
        metavar="BYTES",
        type=at_least_1,
        default=d.max_body_bytes,
        help="largest request body or message in bytes (1 MiB)",
    )
    sv.add_argument(
        "--call-deadline",
        metavar="SECONDS",
        type=seconds,
        default=d.call_deadline_s,
        help=f"seconds a session's call may run before that session is closed ({d.call_deadline_s:g})",
    )
    sv.add_argument(
        "--session-memory-mib",
        metavar="MIB",
        type=at_least_1,
        default=d.session_memory_mib,
        help=(
            "MiB a session may hold in its worker; past it the session is closed (default: a quarter of "
            f"a worker's, at most {DEFAULT_SESSION_MEMORY_CAP_MIB})"
        ),
    )
    sv.add_argument(
        "--worker-memory-mib",
        metavar="MIB",
        type=at_least_1,
        default=d.worker_memory_mib,
        help=(
            "MiB one worker may hold; past it new sessions are refused (default: half the memory this "
            f"server may use, its cgroup's or the host's, split over the workers, at most "
            f"{DEFAULT_WORKER_MEMORY_CAP_MIB})"
        ),
    )
    sv.add_argument(
        "--oracle",
        action="store_true",
        help="let GET /state answer the oracle's reply (default: off the wire)",
    )
    sv.add_argument(
        "--header-timeout",
        metavar="SECONDS",
        type=seconds,
        default=d.header_timeout_s,
        help=f"seconds a client may take to send a request's headers, and its body ({d.header_timeout_s:g})",
    )
    sv.add_argument(
        "--keep-alive",
        metavar="SECONDS",
        type=seconds,
        default=d.keep_alive_s,
        help=f"seconds an idle HTTP connection is kept open ({d.keep_alive_s:g})",
    )
    sv.add_argument(
        "--max-connections",
        metavar="N",
        type=at_least_1,
        default=d.max_connections,
        help=f"open connections at once, WebSockets included ({d.max_connections})",
    )
    sv.add_argument(
        "--max-connections-per-peer",
        metavar="N",
        type=at_least_1,
        default=d.max_connections_per_peer,
        help=f"open connections from one address; above --max-sessions for a trainer's WebSockets "
        f"({d.max_connections_per_peer})",
    )
    sv.add_argument("--access-log", action="store_true", help="log every request (uvicorn's access log)")
    sv.set_defaults(func=run, interrupted="")


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in [0, 65535], got {value}")
    return value


def workers(text: str) -> int:
    """Worker processes: at least 1, at most 4 per CPU."""
    value, most = _int(text), 4 * (os.cpu_count() or 1)
    if not 1 <= value <= most:
        raise argparse.ArgumentTypeError(f"must be in [1, {most}] (4 per CPU), got {value}")
    return value


def at_least_1(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds above 0."""
    value = _float(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return value


def idle_seconds(text: str) -> float:
    """The idle timeout: at least :data:`MIN_IDLE_TIMEOUT_S` (the reaper looks every quarter of it)."""
    value = _float(text)
    if not MIN_IDLE_TIMEOUT_S <= value < math.inf:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds >= {MIN_IDLE_TIMEOUT_S:g}, got {text!r}"
        )
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text[:40]!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text[:40]!r}") from None


def run(args: argparse.Namespace) -> int:
    """Start the server; returns once it has drained and stopped."""
    try:
        from vlm_envs.serve.server import bind
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
            call_deadline_s=args.call_deadline,
            # the backstop that kills a worker stays well above the deadline that ends a call
            call_timeout_s=max(ServeConfig.call_timeout_s, 3 * args.call_deadline),
            session_memory_mib=args.session_memory_mib,
            worker_memory_mib=args.worker_memory_mib,
            oracle=args.oracle,
            header_timeout_s=args.header_timeout,
            keep_alive_s=args.keep_alive,
            max_connections=args.max_connections,
            max_connections_per_peer=args.max_connections_per_peer,
            access_log=args.access_log,
        )
        served = config.served()  # an unknown env is the user's to fix, before anything starts
        sock = bind(config)  # the port taken, or why not, before the workers start
    except ServeConfigError as err:
        raise UsageError(str(err)) from err
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(
        f"vlm-envs serve: {', '.join(sorted(served))} on http://{host}:{sock.getsockname()[1]}",
        flush=True,
    )
    serve(config, sock)
    return 0
