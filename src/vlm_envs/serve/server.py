"""Run the app on uvicorn; SIGTERM (or Ctrl-C) drains before the server stops.

uvicorn's own shutdown fails open WebSockets at once (close code 1012), which would drop a step in
flight. So the first SIGTERM/SIGINT refuses new sessions and calls (503), waits for the calls in
flight to answer (at most ``drain_timeout_s``), and only then lets uvicorn stop; a second Ctrl-C
forces it.
"""

from __future__ import annotations

from types import FrameType

import uvicorn

from vlm_envs.serve.app import create_app
from vlm_envs.serve.config import ServeConfig
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


def uvicorn_config(config: ServeConfig, app: object) -> uvicorn.Config:
    """uvicorn's settings for ``config``: WebSockets through ``websockets`` (uvicorn's sans-I/O
    implementation of it), messages capped at the body cap."""
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        ws="websockets-sansio",
        ws_max_size=config.max_body_bytes,
        ws_ping_interval=None,  # idle sessions are the idle timeout's job; pings cost at thousands
        ws_per_message_deflate=False,  # PNGs are compressed already: deflating base64 costs CPU both ways
        backlog=BACKLOG,
        log_level="warning",
        timeout_graceful_shutdown=config.drain_timeout_s,
        lifespan="on",
    )


def run(config: ServeConfig) -> None:
    """Serve until SIGTERM/SIGINT (blocking)."""
    app = create_app(config)
    server = DrainingServer(uvicorn_config(config, app), app.state.service)
    server.run()
