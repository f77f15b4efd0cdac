"""The serve tests' harness: a real ``vlm-envs serve`` app on uvicorn, on a loopback port of its own,
in a thread of the test."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import uvicorn

from vlm_envs.serve.app import create_app
from vlm_envs.serve.config import ServeConfig
from vlm_envs.serve.server import uvicorn_config
from vlm_envs.serve.service import Service

#: A served env (a .py file) whose step sleeps for the seconds a reply asks: "sleep 2.5".
SLOW_ENV = str(Path(__file__).parent / "slow_env.py")


@dataclasses.dataclass
class Running:
    """A started server: its base URL and its service (workers, sessions)."""

    url: str
    service: Service
    server: uvicorn.Server

    @property
    def ws_url(self) -> str:
        return self.url.replace("http://", "ws://") + "/ws"


class ServerThread:
    """``with ServerThread(config) as running:`` serves ``config`` until the block ends."""

    def __init__(self, config: ServeConfig) -> None:
        self.app = create_app(dataclasses.replace(config, port=0))
        self.server = uvicorn.Server(uvicorn_config(self.app.state.service.config, self.app))
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="test-serve")

    def __enter__(self) -> Running:
        self.thread.start()
        for _ in range(1200):
            if self.server.started or not self.thread.is_alive():
                break
            self.thread.join(0.05)
        assert self.server.started, "the server did not start"
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return Running(f"http://127.0.0.1:{port}", self.app.state.service, self.server)

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
