"""Worker process of :mod:`vlm_envs.verify.pool`: reads JSON-line calls on stdin, answers on stdout.

Run as ``python -m vlm_envs.verify._worker [--init module:function] [--max-memory-mb N]``.
A request is ``{"f": "module:function", "a": [args...]}``; the reply is ``{"ok": result}`` or
``{"err": "..."}``. The first line written is ``{"ready": true}`` once ``--init`` has run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any


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


def main(argv: list[str] | None = None) -> None:
    """Serve calls until stdin closes."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--init", default=None)
    parser.add_argument("--max-memory-mb", type=int, default=0)
    opts = parser.parse_args(argv)
    # Keep the protocol channel private: stray prints from libraries go to stderr.
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    if opts.init:
        _resolve(opts.init)()
    if opts.max_memory_mb:
        _limit_memory(opts.max_memory_mb)
    channel.write('{"ready": true}\n')
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = {"ok": _resolve(request["f"])(*request["a"])}
        except Exception as exc:  # report any failure of one call; the worker stays up
            reply = {"err": f"{type(exc).__name__}: {exc}"[:500]}
        channel.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
