"""Processes of :mod:`vlm_envs.verify.pool`: a zygote that forks workers, and the workers' call loop.

Run as ``python -m vlm_envs.verify._worker [--init module:function] [--max-memory-mb N]`` with stdin a
Unix socket to the pool (the *control* socket). The zygote runs ``--init`` (imports, warm-up), caps its
address space (inherited by every worker), writes ``ready``, then for each byte it receives with a
socket attached forks a worker that serves calls on that socket, and answers the worker's pid.

A worker reads JSON lines ``{"id": n, "f": "module:function", "a": [args...], "t": seconds}`` and
answers ``{"id": n, "ok": result}`` or ``{"id": n, "err": "..."}``. It exits when its socket closes,
and on its own when a call runs ``GRACE`` seconds past its ``t`` (the pool kills it at ``t``; this
covers a pool that is gone).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import signal
import socket
from collections.abc import Callable
from typing import Any

#: Seconds a call may run past its limit before its worker exits on its own.
GRACE = 2.0


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def _limit_memory(max_mb: int) -> None:
    try:
        import resource
    except ImportError:  # not on POSIX: the wall-clock kill still bounds the worker
        return
    limit = max_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _answer(request: Any) -> dict[str, Any]:
    """Run one request; any failure of the call is reported in the reply, never raised."""
    request_id = request.get("id") if isinstance(request, dict) else None
    try:
        signal.setitimer(signal.ITIMER_REAL, float(request["t"]) + GRACE)
        try:
            return {"id": request_id, "ok": _resolve(request["f"])(*request["a"])}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Exception as exc:  # report any failure of one call; the worker stays up
        return {"id": request_id, "err": f"{type(exc).__name__}: {exc}"[:500]}


def serve(channel: socket.socket) -> None:
    """A worker's life: answer calls on ``channel`` until it closes."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGALRM, lambda *_: os._exit(70))
    for line in channel.makefile("rb"):
        try:
            request = json.loads(line)
        except ValueError:
            request = None
        channel.sendall((json.dumps(_answer(request)) + "\n").encode())


def main(argv: list[str] | None = None) -> None:
    """The zygote: fork a worker per request on the control socket (stdin) until it closes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", default=None)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    opts = parser.parse_args(argv)
    control = socket.socket(fileno=os.dup(0))
    # Keep the standard streams free: stray prints from libraries go to stderr, nothing reads stdin.
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    if opts.init:
        _resolve(opts.init)()
    if opts.max_memory_mb:
        _limit_memory(opts.max_memory_mb)
    gc.freeze()  # forked workers share the warm heap: the collector never writes to (copies) its pages
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps exited workers
    control.sendall(b"ready\n")
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1, 1)
        if not data:
            return
        if not fds:
            continue
        channel = socket.socket(fileno=fds[0])
        pid = os.fork()
        if pid == 0:
            control.close()
            try:
                serve(channel)
            finally:
                os._exit(0)
        channel.close()
        control.sendall(f"{pid}\n".encode())


if __name__ == "__main__":
    main()
