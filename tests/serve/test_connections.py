"""Point 3 of issue 44: connections a client opens and stalls are closed on deadlines, capped in
number overall and per peer address (WebSockets included), and 1,100 stalled connections beside a
server at a 1,024 file limit leave ``/health`` and the sessions answering.

Run as a script, the slowloris measurement prints its figures for any source tree:
``.venv/bin/python tests/serve/test_connections.py [--src /tmp/before/src] [--stalled 1100]``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest
import requests
from serve_support import SLOW_ENV, ServerThread
from websockets.sync.client import ClientConnection, connect

from vlm_envs.serve.config import ServeConfig, ServeConfigError
from vlm_envs.serve.connections import GuardedWebSocket, raise_file_limit

#: Where the stalled connections come from: an address of their own, so the per-peer cap is theirs.
ATTACKER = "127.0.0.2"
HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def raw(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def seconds_until_closed(sock: socket.socket, limit: float, start: float | None = None) -> float | None:
    """Seconds from ``start`` (default: now) until the server closes ``sock`` (what it sends is read
    and dropped), None if not within ``limit``."""
    start = time.monotonic() if start is None else start
    while (left := limit - (time.monotonic() - start)) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return time.monotonic() - start
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
        except TimeoutError:
            return None
    return None


def answered(port: int, source: str = "127.0.0.1") -> bool:
    """Whether a new connection from ``source`` gets ``/health`` answered (False: closed at once)."""
    with raw(port, source) as sock:
        sock.settimeout(10)
        try:
            sock.sendall(HEALTH)
            return sock.recv(65536).startswith(b"HTTP/1.1 200")
        except (ConnectionResetError, BrokenPipeError):
            return False


@contextlib.contextmanager
def session(port: int, source: str) -> Iterator[ClientConnection]:
    """A WebSocket session from ``source``, reset once."""
    with connect(f"ws://127.0.0.1:{port}/ws", sock=raw(port, source), open_timeout=10) as conn:
        conn.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(conn.recv(timeout=30))["type"] == "observation"
        yield conn


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def wait_for(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def hasty() -> Iterator:
    """A server with one-second deadlines."""
    config = ServeConfig(envs=(SLOW_ENV,), workers=1, header_timeout_s=1.0, keep_alive_s=1.0)
    with ServerThread(config) as running:
        yield running


def test_a_request_head_or_body_that_stalls_is_closed_at_the_header_timeout(hasty):
    port = port_of(hasty.url)
    start = time.monotonic()
    silent, partial, body = raw(port), raw(port), raw(port)
    partial.sendall(b"GET /hea")
    body.sendall(
        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
    )
    for sock in (silent, partial, body):
        with sock:
            took = seconds_until_closed(sock, 10, start)
            assert took is not None and 0.8 < took < 6, took  # 1 s, and the machine may be busy


def test_a_kept_alive_connection_closes_when_idle_and_its_next_request_has_the_deadline(hasty):
    port = port_of(hasty.url)
    with raw(port) as idle, raw(port) as stalls:
        for sock in (idle, stalls):
            sock.sendall(HEALTH)
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        start = time.monotonic()
        stalls.sendall(b"GET /he")  # a second request, begun and left
        for sock in (idle, stalls):
            took = seconds_until_closed(sock, 10, start)
            assert took is not None and took < 4, (
                took
            )  # keep_alive_s=1, header_timeout_s=1 (uvicorn's own: 5)


def tcp_state(sock: socket.socket) -> int:
    """The socket's TCP state, read without reading its data (Linux's ``tcp_info``, first byte)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="reads the TCP state through Linux's TCP_INFO")
def test_a_client_that_leaves_its_replies_unread_is_dropped(hasty):
    established = 1  # TCP_ESTABLISHED; the server's close or reset ends it
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port_of(hasty.url)))
        sock.settimeout(30)
        sock.sendall(HEALTH * 30_000)  # 7 MB of replies, never read
        deadline = time.monotonic() + 60  # the buffers fill, the server's writing pauses, 1 s later: dropped
        while tcp_state(sock) == established and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tcp_state(sock) != established  # uvicorn's own waits on such a reader forever


def test_a_call_slower_than_the_header_timeout_is_not_cut(hasty):
    session = requests.post(hasty.url + "/reset", json={"seed": 1}, timeout=30).json()["metadata"][
        "session_id"
    ]
    answer = requests.post(
        hasty.url + "/step", json={"session_id": session, "action": {"text": "sleep 2.5"}}, timeout=30
    )
    assert answer.status_code == 200 and answer.json()["observation"]["text"] == "step 1"


def test_a_websocket_is_read_on_while_its_client_waits_and_held_back_when_it_floods(hasty, monkeypatch):
    """uvicorn stops reading a WebSocket at each message until the app takes it; ours only once
    MESSAGES_AHEAD wait, so a client that waits for each reply is never paused, one that floods is."""
    reading: list[bool] = []
    queued = GuardedWebSocket.send_receive_event_to_app

    def recorded(self: GuardedWebSocket) -> None:
        queued(self)
        reading.append(self.transport.is_reading())

    monkeypatch.setattr(GuardedWebSocket, "send_receive_event_to_app", recorded)
    step = json.dumps({"type": "step", "data": {"text": "go"}})
    with session(port_of(hasty.url), "127.0.0.1") as ws:
        reading.clear()
        for _ in range(20):
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1, "config": {"turns": 1000}}}))
            assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        assert reading == [True] * 20
        reading.clear()
        for _ in range(50):  # sent at once, none read yet: the app falls behind
            ws.send(step)
        texts = [json.loads(ws.recv(timeout=30))["data"]["observation"]["text"] for _ in range(50)]
        assert texts == [f"step {n}" for n in range(1, 51)]
        assert False in reading


def test_connections_are_capped_per_peer_and_overall_websockets_included():
    config = ServeConfig(envs=(SLOW_ENV,), workers=1, max_connections=6, max_connections_per_peer=3)
    with ServerThread(config) as running, contextlib.ExitStack() as stack:
        port, metrics = port_of(running.url), running.service.metrics
        sessions = [stack.enter_context(session(port, ATTACKER)) for _ in range(3)]
        assert not answered(port, ATTACKER)  # its fourth connection is closed at once
        assert answered(port)  # another address is still served
        sessions.pop().close()
        wait_for(lambda: metrics.connections == 2)
        assert answered(port, ATTACKER)  # a WebSocket that closed gave its place back
        wait_for(lambda: metrics.connections == 2)
        stalled = [stack.enter_context(raw(port, "127.0.0.3")) for _ in range(3)]
        stalled.append(raw(port, "127.0.0.4"))
        wait_for(lambda: metrics.connections == 6)
        assert not answered(port)  # six open: everyone is refused
        stalled.pop().close()
        wait_for(lambda: metrics.connections == 5)
        assert answered(port)
        assert metrics.refusals == {"peer": 1, "connections": 1}


def test_the_file_limit_is_raised_and_a_cap_over_it_is_refused():
    script = (
        "import resource\n"
        "from vlm_envs.serve.config import ServeConfig\n"
        "from vlm_envs.serve.connections import GuardedWebSocket, raise_file_limit\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))\n"
        "print(raise_file_limit(ServeConfig(max_connections=min(1024, hard) // 2)) == hard)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
    with pytest.raises(ServeConfigError, match=r"needs \d+ open files .*\(ulimit -n\)"):
        raise_file_limit(ServeConfig(max_connections=10**9))


@dataclasses.dataclass
class Figures:
    """What the slowloris measurement saw: latencies in seconds, failures counted."""

    health: list[float] = dataclasses.field(default_factory=list)
    health_failed: int = 0
    steps: list[float] = dataclasses.field(default_factory=list)
    steps_failed: int = 0
    opened: list[float] = dataclasses.field(default_factory=list)
    opens_failed: int = 0

    def line(self, what: str, values: list[float], failed: int) -> str:
        worst = f"{max(values):.3f}" if values else "-"
        p50 = f"{sorted(values)[len(values) // 2]:.3f}" if values else "-"
        return f"{what:<34} {len(values):>4} ok {failed:>4} failed   p50 {p50:>6} s   worst {worst:>6} s"

    def table(self) -> str:
        return "\n".join(
            (
                self.line("GET /health (new connection)", self.health, self.health_failed),
                self.line("victim step (open WebSocket)", self.steps, self.steps_failed),
                self.line("victim new session (ws + reset)", self.opened, self.opens_failed),
            )
        )


def slowloris(url: str, stalled: int, window_s: float) -> Figures:
    """Hold ``stalled`` connections that sent ``GET /hea`` (from :data:`ATTACKER`) while a prober calls
    ``/health`` on new connections, a victim steps its open WebSocket session and another opens new
    sessions, for ``window_s``."""
    port, figures = port_of(url), Figures()
    stack = contextlib.ExitStack()
    victim = stack.enter_context(session(port, "127.0.0.1"))
    attack = []
    for _ in range(stalled):
        attack.append(raw(port, ATTACKER))
        attack[-1].sendall(b"GET /hea")
    end = time.monotonic() + window_s

    def timed(call, into: list[float]) -> bool:  # type: ignore[no-untyped-def]
        start = time.monotonic()
        try:
            call()
        except Exception:
            return False
        into.append(time.monotonic() - start)
        return True

    def probe() -> None:
        while time.monotonic() < end:
            ok = timed(lambda: requests.get(url + "/health", timeout=5).raise_for_status(), figures.health)
            figures.health_failed += not ok
            time.sleep(0.2)

    def step() -> None:
        while time.monotonic() < end:
            for kind, data in (("reset", {"seed": 1}), ("step", {"text": "go"}), ("step", {"text": "go"})):
                message = json.dumps({"type": kind, "data": data})
                ok = timed(lambda m=message: victim.send(m) or victim.recv(timeout=5), figures.steps)
                figures.steps_failed += not ok

    def open_and_close() -> None:
        with session(port, "127.0.0.1"):
            pass

    def open_session() -> None:
        while time.monotonic() < end:
            figures.opens_failed += not timed(open_and_close, figures.opened)

    threads = [threading.Thread(target=target) for target in (probe, step, open_session)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(window_s + 30)
    for sock in attack:
        sock.close()
    with contextlib.suppress(Exception):
        stack.close()
    return figures


@contextlib.contextmanager
def serving(src: str | None, nofile: int = 1024) -> Iterator[str]:
    """``vlm-envs serve`` (a process) from the tree ``src`` (default: this checkout) at a soft file
    limit of ``nofile``; yields its URL once ``/health`` answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = (
        "import resource, runpy, sys\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({nofile}, hard))\n"
        f"sys.argv = ['vlm-envs', 'serve', {SLOW_ENV!r}, '--port', '{port}', '--workers', '1']\n"
        "runpy.run_module('vlm_envs.cli', run_name='__main__')\n"
    )
    env = {**os.environ, "PYTHONPATH": src} if src else None
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:  # not a pipe: one nobody reads stalls the server once full
        server = subprocess.Popen([sys.executable, "-c", run], env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while True:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"the server did not answer /health: {log.read().decode()[-2000:]}")
                with contextlib.suppress(requests.RequestException):
                    if requests.get(url + "/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.2)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def room_for(stalled: int) -> None:
    """Raise this process's soft file limit for ``stalled`` client sockets (skip where it cannot)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < stalled + 512:
        pytest.skip(f"the hard file limit ({hard}) is below {stalled + 512}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, stalled + 512), hard))


def test_1100_stalled_connections_leave_health_and_sessions_answering():
    room_for(1100)
    with serving(None) as url:
        figures = slowloris(url, stalled=1100, window_s=6.0)
    print("\n" + figures.table())
    assert figures.health and not figures.health_failed and max(figures.health) < 3.0, figures.table()
    assert figures.steps and not figures.steps_failed and max(figures.steps) < 3.0, figures.table()
    assert figures.opened and not figures.opens_failed and max(figures.opened) < 3.0, figures.table()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--src", help="the source tree the server runs (default: this checkout's)")
    parser.add_argument("--stalled", type=int, default=1100)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    with serving(args.src) as url:
        figures = slowloris(url, args.stalled, args.window)
    print(
        f"server from {args.src or 'this checkout'}, soft file limit 1024, {args.stalled} stalled connections"
    )
    print(figures.table())


if __name__ == "__main__":
    main()
