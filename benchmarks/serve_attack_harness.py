"""What ``serve_attacks.py`` stands on: a ``vlm-envs serve`` subprocess (in its own memory cgroup when
the machine lets us make one), a plain HTTP/1.1 client, victim WebSocket sessions, a ``/health``
poller, and the result row with its table. Only the wire protocol is used (docs/serve.md), never the
server's modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

#: Attack traffic leaves from this loopback address, victims and the poller from 127.0.0.1, so a
#: per-peer cap on the server can tell a stranger from its neighbours (all of 127/8 is loopback).
ATTACKER = "127.0.0.2"
NEIGHBOUR = "127.0.0.1"
#: cgroup v1 memory controller (where a fresh cgroup per server is made, if we may).
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
#: Fixed valid replies the victims cycle through (Sokoban's four moves).
MOVES = ("<answer>Left</answer>", "<answer>Up</answer>", "<answer>Right</answer>", "<answer>Down</answer>")


class Lost(Exception):
    """A victim's session ended: an error frame or a dropped connection."""


async def http(
    port: int, method: str, path: str, body: object = None, *, timeout: float = 10.0, source: str = ATTACKER
) -> tuple[int, bytes]:
    """One HTTP/1.1 request on a fresh connection from ``source``: (status, body)."""

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection(NEIGHBOUR, port, local_addr=(source, 0))
        try:
            data = b"" if body is None else json.dumps(body).encode()
            head = (
                f"{method} {path} HTTP/1.1\r\nHost: {NEIGHBOUR}:{port}\r\nConnection: close\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
            )
            writer.write(head.encode() + data)
            return await reader.read()
        finally:
            writer.close()

    raw = await asyncio.wait_for(exchange(), timeout)
    if not raw:
        raise ConnectionError("the server closed the connection without an answer")
    head, _, payload = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), payload


def detail(payload: bytes) -> str:
    """An error body's ``detail`` (FastAPI's shape), else the body as text."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(payload).get("detail"))
    return payload.decode(errors="replace")


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, from /proc."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
    return found


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (MB)."""
    total = 0
    for current in process_tree(pid):
        with contextlib.suppress(OSError, StopIteration, ValueError):
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
    return total / 1024


class Server:
    """``vlm-envs serve`` from source tree ``src`` on a free loopback port, started in its own process
    group (and memory cgroup of ``memory_mb`` when one can be made), with ``nofile`` as its soft limit."""

    def __init__(self, src: str, workers: int, memory_mb: int, nofile: int) -> None:
        with socket.socket() as sock:
            sock.bind((NEIGHBOUR, 0))
            self.port = sock.getsockname()[1]
        self.cgroup = self._cgroup(memory_mb)
        command = [sys.executable, "-m", "vlm_envs.cli", "serve", "--port", str(self.port)]
        command += ["--workers", str(workers)]
        prelude = f"ulimit -S -n {nofile}; " if nofile else ""
        if self.cgroup is not None:
            prelude += f"echo $$ > {self.cgroup / 'cgroup.procs'}; "
        environ = {**os.environ, "PYTHONPATH": src, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            ["sh", "-c", prelude + 'exec "$@"', "sh", *command],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @staticmethod
    def _cgroup(memory_mb: int) -> Path | None:
        if not memory_mb:
            return None
        path = CGROUP_ROOT / f"vlm-envs-attack-{os.getpid()}-{time.monotonic_ns()}"
        try:
            path.mkdir()
            (path / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return path

    def wait_healthy(self, timeout: float = 180.0) -> None:
        """Block until ``/health`` answers 200; ``RuntimeError`` if the server exits or never answers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}")
            with contextlib.suppress(OSError, asyncio.TimeoutError, ValueError):
                if asyncio.run(http(self.port, "GET", "/health", timeout=2, source=NEIGHBOUR))[0] == 200:
                    return
            time.sleep(0.3)
        raise RuntimeError("the server never answered /health")

    def rss_mb(self) -> float:
        """The server's and its workers' resident memory (MB)."""
        return rss_mb(self.proc.pid)

    def children(self) -> set[int]:
        """The server's descendant processes now."""
        return set(process_tree(self.proc.pid)[1:])

    def oom_kills(self) -> int | None:
        """OOM kills in the server's cgroup so far (None without a cgroup)."""
        if self.cgroup is None:
            return None
        for line in (self.cgroup / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return None

    def stop(self) -> None:
        """SIGTERM, a few seconds to drain, then SIGKILL to its process group; the cgroup removed."""
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if self.cgroup is not None:
            for _ in range(50):  # the group's last processes take a moment to leave it
                with contextlib.suppress(OSError):
                    self.cgroup.rmdir()
                    return
                time.sleep(0.1)


@dataclass
class VictimStats:
    """What the victim sessions saw: step latencies (s), sessions lost, calls still unanswered."""

    latencies: list[float] = field(default_factory=list)
    longest_wait_s: float = 0.0  # any call's, answered or lost
    lost: int = 0
    first_loss: str = ""
    pending: dict[int, float] = field(default_factory=dict)  # victim -> when its waiting call was sent

    def lose(self, why: str) -> None:
        """Count a lost session, keeping the first reason."""
        self.lost += 1
        self.first_loss = self.first_loss or why[:160]

    def worst_s(self, now: float) -> float:
        """The longest wait for a reply: any call's, answered or lost, or still unanswered at ``now``."""
        return max([self.longest_wait_s, *(now - t for t in self.pending.values())])

    def stalled(self, now: float, over_s: float) -> int:
        """Victims whose call has waited more than ``over_s`` at ``now``."""
        return sum(now - t > over_s for t in self.pending.values())

    def p50_s(self) -> float:
        """The median answered step (NaN with none)."""
        return statistics.median(self.latencies) if self.latencies else float("nan")


async def victim(port: int, index: int, stats: VictimStats) -> None:
    """One Sokoban player (default config) over ``/ws``, stepping fixed moves until cancelled; a lost
    session is counted and a new one opened."""
    seed = 1000 * index

    async def call(ws: ClientConnection, message: dict) -> dict:
        stats.pending[index] = time.perf_counter()
        try:
            await ws.send(json.dumps(message))
            reply = json.loads(await ws.recv())
        except (OSError, WebSocketException, ValueError) as err:  # dropped or garbled: the session is gone
            raise Lost(f"{type(err).__name__}: {err}") from None
        finally:
            started = stats.pending.pop(index)
            stats.longest_wait_s = max(stats.longest_wait_s, time.perf_counter() - started)
        if reply.get("type") != "observation":
            data = reply.get("data")
            raise Lost(str(data.get("message") if isinstance(data, dict) else data))
        if message["type"] == "step":
            stats.latencies.append(time.perf_counter() - started)
        return reply["data"]

    while True:
        try:
            url = f"ws://{NEIGHBOUR}:{port}/ws"
            async with connect(url, ping_interval=None, max_size=None, open_timeout=None) as ws:
                await call(ws, {"type": "reset", "data": {"env": "sokoban", "seed": seed}})
                for step in range(1 << 30):
                    data = await call(ws, {"type": "step", "data": {"text": MOVES[step % len(MOVES)]}})
                    if data["done"]:
                        seed += 1
                        await call(ws, {"type": "reset", "data": {"env": "sokoban", "seed": seed}})
        except (Lost, OSError, WebSocketException) as err:
            stats.lose(str(err))
            await asyncio.sleep(0.5)


@dataclass
class HealthStats:
    """``/health`` as a neighbour sees it, polled twice a second, and the server's RSS peak."""

    latencies: list[float] = field(default_factory=list)
    failed: int = 0
    rss_peak_mb: float = 0.0


async def poll_health(server: Server, stats: HealthStats, timeout: float = 5.0) -> None:
    """Poll ``/health`` (a failure: no 200 within ``timeout``) and sample RSS until cancelled."""
    while True:
        stats.rss_peak_mb = max(stats.rss_peak_mb, server.rss_mb())
        started = time.perf_counter()
        try:
            ok = (await http(server.port, "GET", "/health", timeout=timeout, source=NEIGHBOUR))[0] == 200
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            ok = False
        stats.latencies.append(time.perf_counter() - started)
        stats.failed += not ok
        await asyncio.sleep(max(0.0, 0.5 - (time.perf_counter() - started)))


async def health_sessions(port: int) -> int | None:
    """The session count ``/health`` reports now (None if it does not answer)."""
    with contextlib.suppress(OSError, asyncio.TimeoutError, ValueError):
        status, body = await http(port, "GET", "/health", timeout=5, source=NEIGHBOUR)
        return json.loads(body).get("sessions") if status == 200 else None
    return None


@dataclass
class Row:
    """One attack on one code: what its neighbours saw."""

    attack: str
    code: str
    workers: int
    window_s: float
    victim_steps: int
    victim_p50_ms: float
    victim_worst_ms: float
    victims_lost: int
    victims_stalled: int
    health_worst_ms: float
    health_failed: str  # failed/polls
    rss_before_mb: float
    rss_peak_mb: float
    rss_after_mb: float
    sessions_after: int | None  # /health's count once the victims have closed
    workers_gone: int
    oom_kills: int | None
    got_through: bool
    note: str


def code_label(src: str) -> str:
    """The commit of ``src``'s checkout, ``+changes`` when its tree differs from it."""
    git = ["git", "-C", src]
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "."], capture_output=True, text=True).stdout
    return (head or src) + ("+changes" if dirty.strip() else "")


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    head = [
        "attack", "code", "workers", "window s", "victim steps", "p50 ms", "worst ms", "lost",
        "stalled at end", "/health worst ms", "/health failed/polls", "RSS before / peak / after MB",
        "sessions after", "workers gone", "OOM kills", "got through", "note",
    ]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [
            r.attack, r.code, r.workers, f"{r.window_s:g}", r.victim_steps, f"{r.victim_p50_ms:.0f}",
            f"{r.victim_worst_ms:,.0f}", r.victims_lost, r.victims_stalled, f"{r.health_worst_ms:,.0f}",
            r.health_failed, f"{r.rss_before_mb:,.0f} / {r.rss_peak_mb:,.0f} / {r.rss_after_mb:,.0f}",
            r.sessions_after, r.workers_gone, "-" if r.oom_kills is None else r.oom_kills,
            "yes" if r.got_through else "no", r.note,
        ]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)
