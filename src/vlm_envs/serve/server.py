"""Run the app on uvicorn; SIGTERM (or Ctrl-C) drains before the server stops.

uvicorn's own shutdown fails open WebSockets at once (close code 1012), which would drop a step in
flight. So the first SIGTERM/SIGINT refuses new sessions and calls (503), waits for the calls in
flight to answer (at most ``drain_timeout_s``), and only then lets uvicorn stop; a second Ctrl-C
forces it. Connections are capped and held to deadlines by :mod:`~vlm_envs.serve.connections`.
"""

from __future__ import annotations

import logging
import os
import socket
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from vlm_envs.serve.app import create_app
from vlm_envs.serve.config import ServeConfig, ServeConfigError
from vlm_envs.serve.connections import ConnectionGuard, raise_file_limit
from vlm_envs.serve.service import Service

#: Pending TCP connections the listening socket queues (thousands of clients connect at once).
BACKLOG = 8192


class DrainingServer(uvicorn.Server):
    """A uvicorn server whose first exit signal drains the service before stopping."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service
        self._draining = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._draining or self.should_exit:
            super().handle_exit(sig, frame)  # a second signal: uvicorn's own (forced) exit
            return
        self._draining = True
        loop = self.service.loop
        if loop is None:  # a signal before the app started: nothing to drain
            super().handle_exit(sig, frame)
            return
        loop.call_soon_threadsafe(self.service.background, self._drain_then_exit())

    async def _drain_then_exit(self) -> None:
        await self.service.drain()
        self.should_exit = True


def uvicorn_config(config: ServeConfig, app: Starlette) -> uvicorn.Config:
    """uvicorn's settings for ``config`` and ``app`` (made by :func:`create_app`): HTTP and WebSockets
    (``websockets``' sans-I/O protocol) under the connection guard, messages capped at the body cap."""
    guard = ConnectionGuard(config, app.state.service.metrics)
    settings = uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        http=guard.http,  # type: ignore[arg-type]  # called as uvicorn calls a protocol class
        ws=guard.websocket,  # type: ignore[arg-type]
        timeout_keep_alive=config.keep_alive_s,  # type: ignore[arg-type]  # a float works: call_later
        ws_max_size=config.max_body_bytes,
        ws_ping_interval=None,  # idle sessions are the idle timeout's job; pings cost at thousands
        ws_per_message_deflate=False,  # PNGs are compressed already: deflating base64 costs CPU both ways
        backlog=BACKLOG,
        log_level="warning",
        access_log=config.access_log,
        timeout_graceful_shutdown=config.drain_timeout_s,
        lifespan="on",
    )
    if config.access_log:  # uvicorn logs each request at INFO, under the server's WARNING
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)
    return settings


def bind(config: ServeConfig) -> socket.socket:
    """The server's socket, bound before anything starts (port 0: one the system picks) but listening
    only once the app has started (until then a client is refused, not queued), after the file limit
    is raised for ``max_connections``; :class:`ServeConfigError` if either fails."""
    raise_file_limit(config)
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((config.host, config.port))
    except OSError as err:
        sock.close()
        why = os.strerror(err.errno) if err.errno else err
        raise ServeConfigError(f"cannot listen on {config.host}:{config.port}: {why}") from None
    return sock


def run(config: ServeConfig, sock: socket.socket | None = None) -> None:
    """Serve until SIGTERM/SIGINT (blocking), on ``sock`` (default: :func:`bind`'s)."""
    sock = sock or bind(config)
    app = create_app(config)
    server = DrainingServer(uvicorn_config(config, app), app.state.service)
    server.run(sockets=[sock])  # uvicorn listens on it (BACKLOG) once the app has started
