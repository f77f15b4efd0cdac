"""The bearer token (required off loopback, checked on every request and WebSocket but /health) and SIGTERM's
drain: calls in flight finish, then the server exits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests
from serve_support import SLOW_ENV, ServerThread
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from vlm_envs.cli import main
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.serve.config import TOKEN_ENV, ServeConfig, ServeConfigError

TOKEN = "s3cret-token"
ROUTES = [
    ("POST", "/reset", {"env": SLOW_ENV}),
    ("POST", "/step", {"session_id": "x", "action": {"text": "a"}}),
    ("POST", "/close", {"session_id": "x"}),
    ("GET", "/state", None),
    ("GET", "/metrics", None),
    ("GET", "/schema", None),
    ("GET", "/metadata", None),
]


def test_a_non_loopback_bind_without_a_token_is_refused(capsys, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(ServeConfigError, match="needs a bearer token"):
        ServeConfig(host="0.0.0.0")
    assert main(["serve", "sokoban", "--host", "0.0.0.0", "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlm-envs: error: binding '0.0.0.0' (not loopback) needs a bearer token")
    assert len(err.splitlines()) == 1
    ServeConfig(host="0.0.0.0", token=TOKEN)  # with one it may bind anywhere
    assert main(["serve", "no_such_env", "--port", "1"]) == 2
    assert "unknown env 'no_such_env'" in capsys.readouterr().err


def test_the_token_is_checked_on_every_request_and_websocket(monkeypatch):
    with ServerThread(ServeConfig(envs=(SLOW_ENV,), workers=1, token=TOKEN)) as running:
        for method, path, body in ROUTES:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                answer = requests.request(method, running.url + path, json=body, headers=headers, timeout=10)
                assert answer.status_code == 401, (path, headers)
                assert "bearer token" in answer.json()["detail"]
        good = {"Authorization": f"Bearer {TOKEN}"}
        assert requests.get(running.url + "/metrics", headers=good, timeout=10).status_code == 200
        assert requests.get(running.url + "/health", timeout=10).status_code == 200  # open: liveness probes
        with pytest.raises(InvalidStatus) as refused:
            connect(running.ws_url, proxy=None)
        assert refused.value.response.status_code == 403
        with pytest.raises(RemoteEnvError, match="cannot open a session"):
            RemoteEnv(running.url, SLOW_ENV).reset(0)
        monkeypatch.setenv(TOKEN_ENV, TOKEN)  # RemoteEnv takes the token from the environment
        remote = RemoteEnv(running.url, SLOW_ENV)
        assert remote.reset(4)[0].text == "start 4"
        remote.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_step(body: dict) -> requests.Response:
    return requests.post(body.pop("url") + "/step", json=body, timeout=30)


def test_sigterm_lets_the_step_in_flight_finish_then_exits():
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "vlm_envs.cli", "serve", SLOW_ENV, "--port", str(port), "--workers", "1"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, (
                server.stdout and server.stdout.read()
            )
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        session_id = requests.post(url + "/reset", json={"seed": 1}, timeout=10).json()["metadata"][
            "session_id"
        ]
        remote = RemoteEnv(url, SLOW_ENV)
        remote.reset(2)
        answers: list = []
        body = {"url": url, "session_id": session_id, "action": {"text": "sleep 2"}}
        threads = [
            threading.Thread(target=lambda: answers.append(post_step(body))),
            threading.Thread(target=lambda: answers.append(remote.step("sleep 2"))),
        ]
        for thread in threads:
            thread.start()
        while requests.get(url + "/health", timeout=10).json()["in_flight"] < 2:  # both steps sent
            time.sleep(0.05)
        server.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        refused = requests.post(url + "/reset", json={"seed": 1}, timeout=10)  # draining: no new sessions
        assert refused.status_code == 503 and "shutting down" in refused.json()["detail"]
        for thread in threads:
            thread.join(30)
        http_answer = next(a for a in answers if isinstance(a, requests.Response))
        assert http_answer.status_code == 200 and http_answer.json()["observation"]["text"] == "step 1"
        ws_answer = next(a for a in answers if isinstance(a, tuple))
        assert ws_answer[0].text == "step 1"  # the WebSocket step in flight was answered too
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    assert not os.path.exists(f"/proc/{server.pid}")
