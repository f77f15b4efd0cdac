"""Operating ``vlm-envs serve`` (issue 44, points 3 and 10): ``/health`` open and private-free,
``/metrics`` in Prometheus' text format behind the token, the access-log switch, the wire's strict
types and nesting cap, quiet clients that vanish, and the command's flags."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
import requests
from serve_support import SLOW_ENV, ServerThread
from websockets.sync.client import connect

from vlm_envs.cli import main
from vlm_envs.serve.config import ServeConfig
from vlm_envs.serve.guards import MAX_JSON_DEPTH
from vlm_envs.serve.metrics import LATENCY_BUCKETS_S, ServeMetrics

TOKEN = "ops-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Records(logging.Handler):
    """The records a logger emits while attached."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def guarded() -> Iterator:
    """A server with a token and its access log on."""
    config = ServeConfig(envs=(SLOW_ENV,), workers=1, token=TOKEN, access_log=True)
    with ServerThread(config) as running:
        yield running


def test_health_is_open_and_says_nothing_private(guarded):
    session = requests.post(guarded.url + "/reset", json={"seed": 1}, headers=AUTH, timeout=30)
    session_id = session.json()["metadata"]["session_id"]
    answer = requests.get(guarded.url + "/health", timeout=10)  # no token: a liveness probe
    assert answer.status_code == 200
    assert answer.json() == {
        "status": "healthy",
        "sessions": 1,
        "max_sessions": 4096,
        "in_flight": 0,
        "workers": 1,
    }
    assert session_id not in answer.text and "slow_env" not in answer.text
    for path in ("/metrics", "/metadata", "/schema"):
        assert requests.get(guarded.url + path, timeout=10).status_code == 401, path
    requests.post(guarded.url + "/close", json={"session_id": session_id}, headers=AUTH, timeout=10)


def test_metrics_are_prometheus_text_behind_the_token(guarded):
    parser = pytest.importorskip("prometheus_client.parser")
    answer = requests.get(guarded.url + "/metrics", headers=AUTH, timeout=10)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {family.name: family for family in parser.text_string_to_metric_families(answer.text)}
    names = {
        "sessions",
        "max_sessions",
        "calls_in_flight",
        "connections",
        "workers",
        "calls",
        "call_duration_seconds",
    }
    names |= {"worker_restarts", "refusals"}
    assert {f"vlm_envs_serve_{name}" for name in names} == set(families)
    assert families["vlm_envs_serve_call_duration_seconds"].type == "histogram"
    assert families["vlm_envs_serve_calls"].type == "counter"
    (connections,) = families["vlm_envs_serve_connections"].samples
    assert connections.value >= 1  # this request's own
    (workers,) = families["vlm_envs_serve_workers"].samples
    assert workers.value == 1


def test_metrics_render_counts_calls_latency_and_refusals():
    metrics = ServeMetrics()
    for op, seconds in (("step", 0.003), ("step", 0.2), ("reset", 99.0)):
        metrics.call_done(op, seconds)
    metrics.refused("peer")
    metrics.refused('odd "cause"\\\n')
    metrics.worker_restarted()
    text = metrics.render(sessions=2, max_sessions=8, in_flight=1, workers=3)
    lines = set(text.splitlines())
    assert 'vlm_envs_serve_calls_total{op="step"} 2' in lines
    assert 'vlm_envs_serve_calls_total{op="state"} 0' in lines  # every op listed from the start
    assert 'vlm_envs_serve_call_duration_seconds_bucket{le="0.005"} 1' in lines
    assert 'vlm_envs_serve_call_duration_seconds_bucket{le="0.25"} 2' in lines  # cumulative
    assert f'vlm_envs_serve_call_duration_seconds_bucket{{le="{LATENCY_BUCKETS_S[-1]!r}"}} 2' in lines
    assert 'vlm_envs_serve_call_duration_seconds_bucket{le="+Inf"} 3' in lines
    assert "vlm_envs_serve_call_duration_seconds_count 3" in lines
    assert "vlm_envs_serve_call_duration_seconds_sum 99.203" in lines
    assert 'vlm_envs_serve_refusals_total{cause="odd \\"cause\\"\\\\\\n"} 1' in lines
    assert "vlm_envs_serve_worker_restarts_total 1" in lines
    assert "vlm_envs_serve_sessions 2" in lines and "vlm_envs_serve_calls_in_flight 1" in lines


def test_the_access_log_switch(guarded):
    records = Records()
    logging.getLogger("uvicorn.access").addHandler(records)
    try:
        requests.get(guarded.url + "/health", timeout=10)
        time.sleep(0.2)
    finally:
        logging.getLogger("uvicorn.access").removeHandler(records)
    assert any(
        "/health" in record.getMessage() and "200" in record.getMessage() for record in records.records
    )


def test_seeds_and_handles_are_not_coerced(guarded):
    for seed in ("3", 3.0, True, -1):
        answer = requests.post(guarded.url + "/reset", json={"seed": seed}, headers=AUTH, timeout=30)
        assert answer.status_code == 422 and answer.json()["detail"].startswith("invalid seed"), seed
    answer = requests.post(
        guarded.url + "/step", json={"session_id": 7, "action": {"text": "a"}}, headers=AUTH
    )
    assert answer.status_code == 422 and "session_id" in answer.json()["detail"]
    with connect(guarded.ws_url, additional_headers=AUTH, proxy=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": "3"}}))
        reply = json.loads(ws.recv(timeout=30))
        assert reply["type"] == "error" and reply["data"]["status"] == 422
        ws.send(json.dumps({"type": "reset", "data": {"seed": 3}}))
        assert json.loads(ws.recv(timeout=30))["data"]["observation"]["text"] == "start 3"


def test_json_nested_past_the_cap_is_refused_at_the_door(guarded):
    def nested(depth: int) -> bytes:  # {"seed": 1, "options": {"a": [[...]]}}: depth levels in all
        return b'{"seed": 1, "options": {"a": ' + b"[" * (depth - 2) + b"]" * (depth - 2) + b"}}"

    for depth in (MAX_JSON_DEPTH + 1, 900):
        answer = requests.post(guarded.url + "/reset", data=nested(depth), headers=AUTH, timeout=30)
        assert answer.status_code == 400, answer.text
        assert answer.json()["detail"] == f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    answer = requests.post(guarded.url + "/reset", data=b"[" * 500_000, headers=AUTH, timeout=30)
    assert answer.status_code == 400 and "recursion" in answer.json()["detail"]  # json.loads stops itself
    answer = requests.post(guarded.url + "/reset", data=b'{"seed": NaN}', headers=AUTH, timeout=30)
    assert answer.status_code == 400 and "NaN is not JSON" in answer.json()["detail"]
    with connect(guarded.ws_url, additional_headers=AUTH, proxy=None) as ws:
        ws.send(b'{"type": "reset", "data": ' + nested(900) + b"}")
        reply = json.loads(ws.recv(timeout=30))
        assert reply["data"]["status"] == 400 and "nested deeper" in reply["data"]["message"]


def test_a_websocket_client_that_vanishes_logs_nothing(guarded):
    port = int(guarded.url.rsplit(":", 1)[1])
    records = Records()
    logging.getLogger("uvicorn.error").addHandler(records)
    try:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port)) as sock:
                key = base64.b64encode(os.urandom(16)).decode()
                head = (
                    f"GET /ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nUpgrade: websocket\r\n"
                )
                head += (
                    f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
                )
                sock.sendall(head.encode())
                assert sock.recv(4096).startswith(b"HTTP/1.1 101")
            # gone without a close frame
        time.sleep(1.0)
    finally:
        logging.getLogger("uvicorn.error").removeHandler(records)
    assert not [record.getMessage() for record in records.records if record.levelno >= logging.WARNING]
    assert requests.get(guarded.url + "/health", timeout=10).json()["sessions"] == 0


def test_serve_flags_reach_the_config(monkeypatch, capsys):
    seen = {}
    monkeypatch.setattr(
        "vlm_envs.serve.server.run", lambda config, sock: seen.update(config=config, sock=sock)
    )
    argv = ["serve", SLOW_ENV, "--port", "0", "--workers", "1", "--call-deadline", "2.5"]
    argv += ["--session-memory-mib", "64", "--worker-memory-mib", "256", "--oracle", "--header-timeout", "3"]
    argv += [
        "--keep-alive",
        "2",
        "--max-connections",
        "100",
        "--max-connections-per-peer",
        "50",
        "--access-log",
    ]
    assert main(argv) == 0
    config = seen["config"]
    assert (config.call_deadline_s, config.session_memory_mib, config.worker_memory_mib) == (2.5, 64, 256)
    assert (config.oracle, config.access_log, config.header_timeout_s, config.keep_alive_s) == (
        True,
        True,
        3,
        2,
    )
    assert (config.max_connections, config.max_connections_per_peer) == (100, 50)
    port = seen["sock"].getsockname()[1]
    seen["sock"].close()
    assert port > 0 and capsys.readouterr().out.strip().endswith(f" on http://127.0.0.1:{port}")  # not 0


def test_serve_port_0_prints_the_port_it_listens_on():
    command = [sys.executable, "-m", "vlm_envs.cli", "serve", SLOW_ENV, "--port", "0", "--workers", "1"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()  # type: ignore[union-attr]
        port = int(line.strip().rsplit(":", 1)[1])
        assert port > 0, line
        deadline = time.monotonic() + 60
        while True:
            try:
                assert requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200
                break
            except requests.ConnectionError:  # refused until the workers are up
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.2)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def test_a_port_taken_or_a_cap_over_the_file_limit_is_one_line(capsys):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        assert main(["serve", SLOW_ENV, "--port", port, "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"vlm-envs: error: cannot listen on 127.0.0.1:{port}: Address already in use", err
    assert main(["serve", SLOW_ENV, "--port", "0", "--workers", "1", "--max-connections", str(10**9)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ulimit -n" in err, err
