"""serve_load.py's parts: a server subprocess, the WebSocket client that loads it, and what it measured.

The client speaks OpenEnv's ``/ws`` protocol (one connection, one session), so it drives
``vlm-envs serve`` and OpenEnv's own server alike. CPU is read from ``/proc`` (Linux).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import resource
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect

TIMEOUT_S = 300.0
START_TIMEOUT_S = 120.0


@dataclasses.dataclass
class Load:
    """What one server's runs at one session count saw, pooled over rounds."""

    latencies: list[float] = dataclasses.field(default_factory=list)  # seconds, one per step
    failed: int = 0
    first_error: str | None = None
    resets: int = 0
    step_s: float = 0.0  # wall time of the stepping phases
    main_cpu_s: float = 0.0  # the server's first process
    children_cpu_s: float = 0.0  # its descendants (workers)
    client_cpu_s: float = 0.0

    def fail(self, why: str) -> None:
        self.failed += 1
        self.first_error = self.first_error or why

    @property
    def steps_per_s(self) -> float:
        return len(self.latencies) / self.step_s if self.step_s else 0.0

    def _per_step_ms(self, seconds: float) -> float:
        return seconds * 1e3 / max(1, len(self.latencies))

    @property
    def server_cpu_ms(self) -> float:
        """The server's whole process tree's CPU per step (ms)."""
        return self._per_step_ms(self.main_cpu_s + self.children_cpu_s)

    @property
    def client_cpu_ms(self) -> float:
        return self._per_step_ms(self.client_cpu_s)

    def cpu_split_ms(self) -> dict[str, float]:
        return {
            "main process": self._per_step_ms(self.main_cpu_s),
            "children": self._per_step_ms(self.children_cpu_s),
        }


@dataclasses.dataclass
class Server:
    """A server subprocess: ``command`` (``{port}`` in it is the port), its workers reniced to
    ``renice`` once started (``None``: left as they are), ``env`` added to its environment."""

    name: str
    command: list[str]
    renice: int | None = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    process: subprocess.Popen | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self, port: int) -> None:
        """Start it and wait until ``/health`` answers."""
        self.port = port
        command = [part.replace("{port}", str(port)) for part in self.command]
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"{self.name} did not start") from None
                time.sleep(0.2)
        if self.renice is not None:
            for pid in self.pids()[1:]:
                os.setpriority(os.PRIO_PROCESS, pid, self.renice)

    def pids(self) -> list[int]:
        """Its process and their descendants."""
        assert self.process is not None
        return process_tree(self.process.pid)

    def rss_mb(self) -> float:
        """Resident memory of its process tree (MB)."""
        total = 0
        for pid in self.pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
                total += int(
                    next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]
                )
            except (OSError, StopIteration, ValueError):
                continue
        return total / 1024

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(60)


async def request(ws, message: dict, load: Load) -> dict | None:  # type: ignore[no-untyped-def]
    """One request; ``None`` (and a failure counted) unless an observation came back."""
    try:
        await ws.send(json.dumps(message))
        reply = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))
    except Exception as err:
        load.fail(f"{type(err).__name__}: {err}")
        return None
    if reply.get("type") != "observation":
        load.fail(str(reply.get("data"))[:300])
        return None
    return reply["data"]


class Gate:
    """Every session waits here until all of them are open, then until stepping starts."""

    def __init__(self, sessions: int) -> None:
        self.waiting = sessions
        self.all_open = asyncio.Event()
        self.go = asyncio.Event()

    async def opened(self) -> None:
        self.waiting -= 1
        if self.waiting == 0:
            self.all_open.set()
        await self.go.wait()


async def session(
    url: str, index: int, steps: int, config: dict, moves: list[str], gate: Gate, load: Load
) -> None:
    """One session: open, reset, wait for the others, then ``steps`` steps (a finished episode reset)."""
    rng = random.Random(index)
    reset = {"type": "reset", "data": {"env": "sokoban", "seed": index, "config": config}}
    try:
        ws = await connect(url, open_timeout=TIMEOUT_S, ping_interval=None, max_size=None, compression=None)
    except Exception as err:
        load.fail(f"connect: {type(err).__name__}: {err}")
        await gate.opened()
        return
    async with ws:
        ok = await request(ws, reset, load) is not None
        await gate.opened()  # every session is open and reset before any steps
        for _ in range(steps if ok else 0):
            start = time.perf_counter()
            data = await request(ws, {"type": "step", "data": {"text": rng.choice(moves)}}, load)
            if data is None:
                return
            load.latencies.append(time.perf_counter() - start)
            if data["done"]:
                load.resets += 1
                if await request(ws, reset, load) is None:
                    return


async def drive(
    server: Server, sessions: int, steps: int, config: dict, moves: list[str], load: Load
) -> None:
    """Open and reset ``sessions`` sessions on ``server``, then step them all; add to ``load``."""
    gate = Gate(sessions)
    tasks = [
        asyncio.create_task(session(server.url, i, steps, config, moves, gate, load)) for i in range(sessions)
    ]
    await gate.all_open.wait()
    pids = server.pids()
    before = [cpu_s(pid) for pid in pids], client_cpu_s()
    started = time.perf_counter()
    gate.go.set()
    await asyncio.gather(*tasks)
    load.step_s += time.perf_counter() - started
    used = [cpu_s(pid) - was for pid, was in zip(pids, before[0], strict=True)]
    load.main_cpu_s += used[0]
    load.children_cpu_s += sum(used[1:])
    load.client_cpu_s += client_cpu_s() - before[1]


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants, ``pid`` first."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop(0)
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far, all its threads."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``) and how many CPUs this process may use."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        name = next(
            line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")
        )
    except (OSError, StopIteration):
        name = "unknown CPU"
    return f"{name}, {len(os.sched_getaffinity(0))} CPUs"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
