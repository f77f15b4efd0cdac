"""The serve tests' harness: a real ``vlm-envs serve`` app on uvicorn, on a loopback port of its own,
in a thread of the test."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path

import requests
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


# ---- the HTTP calls the fault and isolation tests make ----------------------------------------------


def post(
    running: Running, path: str, body: dict | None = None, data: bytes | None = None
) -> requests.Response:
    return requests.post(running.url + path, json=body, data=data, timeout=120)


def reset(running: Running, env: str = SLOW_ENV, **fields: object) -> requests.Response:
    return post(running, "/reset", {"env": env, "seed": 1, **fields})


def open_session(running: Running, env: str = SLOW_ENV, **fields: object) -> str:
    """A new HTTP session that played its first reset (asserted); its id."""
    answer = reset(running, env, **fields)
    assert answer.status_code == 200, answer.text
    return answer.json()["metadata"]["session_id"]


def step(running: Running, session_id: str, text: str = "go") -> requests.Response:
    return post(running, "/step", {"session_id": session_id, "action": {"text": text}})


def state(running: Running, session_id: str) -> requests.Response:
    return requests.get(running.url + "/state", params={"session_id": session_id}, timeout=120)


def close(running: Running, *session_ids: str) -> None:
    for session_id in session_ids:
        post(running, "/close", {"session_id": session_id})


def detail(answer: requests.Response) -> str:
    """An error answer's one line (asserted one line)."""
    message = answer.json()["detail"]
    assert isinstance(message, str) and "\n" not in message
    return message


def wait_for(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
