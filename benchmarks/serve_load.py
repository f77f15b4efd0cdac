"""Served sessions under load: thousands of concurrent WebSocket sessions of Sokoban vision on one box.

Starts ``vlm-envs serve sokoban`` (the real command, a subprocess), opens ``--sessions`` WebSocket
sessions at once (OpenEnv's ``/ws`` protocol: one connection, one session), resets each, then every
session steps ``--steps`` times concurrently, replies drawn from the four moves (a finished episode is
reset and counted apart). A request fails on an error frame, a dropped connection or a timeout; the
goal is 0 failed. The baseline, measured in the same run: the same env (same config and replies)
stepped in this process, alone, and stepped then encoded as the server encodes a reply (PNG, base64,
JSON). Step latency is send-to-reply as the client sees it, queueing included; steps/s is all
sessions' steps over the stepping phase's wall time. RSS is the server and its workers at the end.

Run (the issue's goal; the lead's command): ``PYTHONPATH=src .venv/bin/python benchmarks/serve_load.py
--sessions 2048 --steps 20``; a smaller run while the machine is shared: ``--sessions 256 --steps 5``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
from websockets.asyncio.client import connect

from vlm_envs import build_env
from vlm_envs.serve.wire import reply_body

CONFIG = {"grid_size": [6, 6], "num_boxes": 1, "render_mode": "vision"}
MOVES = ["<answer>Up</answer>", "<answer>Down</answer>", "<answer>Left</answer>", "<answer>Right</answer>"]
TIMEOUT_S = 300.0


class Load:
    """What the sessions saw: step latencies (s), failures with their first reason, resets."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failed = 0
        self.first_error: str | None = None
        self.resets = 0

    def fail(self, why: str) -> None:
        self.failed += 1
        self.first_error = self.first_error or why


async def request(ws, message: dict, load: Load) -> dict | None:
    """One request; ``None`` (and a failure counted) unless an observation came back."""
    try:
        await ws.send(json.dumps(message))
        reply = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT_S))
    except Exception as err:
        load.fail(f"{type(err).__name__}: {err}")
        return None
    if reply.get("type") != "observation":
        load.fail(str(reply.get("data")))
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


async def session(url: str, index: int, steps: int, gate: Gate, load: Load) -> None:
    rng = random.Random(index)
    reset = {"type": "reset", "data": {"env": "sokoban", "seed": index, "config": CONFIG}}
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
            data = await request(ws, {"type": "step", "data": {"text": rng.choice(MOVES)}}, load)
            if data is None:
                return
            load.latencies.append(time.perf_counter() - start)
            if data["done"]:
                load.resets += 1
                if await request(ws, reset, load) is None:
                    return


async def drive(url: str, sessions: int, steps: int, server: int) -> tuple[Load, float, float, dict]:
    """Open and reset every session, then step them all; also the CPU seconds the stepping took in
    the server's loop, its workers and this client."""
    load = Load()
    gate = Gate(sessions)
    started = time.perf_counter()
    tasks = [asyncio.create_task(session(url, i, steps, gate, load)) for i in range(sessions)]
    await gate.all_open.wait()
    connect_s = time.perf_counter() - started
    workers = process_tree(server)[1:]
    before = (cpu_s(server), sum(map(cpu_s, workers)), client_cpu_s())
    started = time.perf_counter()
    gate.go.set()
    await asyncio.gather(*tasks)
    step_s = time.perf_counter() - started
    after = (cpu_s(server), sum(map(cpu_s, workers)), client_cpu_s())
    used = [b - a for a, b in zip(before, after, strict=True)]
    cpu = dict(zip(("server loop", "workers", "client"), used, strict=True))
    return load, connect_s, step_s, cpu


def in_process(steps: int, encode: bool) -> list[float]:
    """Step latencies (s) of the same env and replies in this process; ``encode``: plus the reply's
    wire encoding, as a server worker does it."""
    env, rng, seed, latencies = build_env("sokoban", **CONFIG), random.Random(0), 0, []
    env.reset(seed)
    for _ in range(steps):
        start = time.perf_counter()
        obs, done, info = env.step(rng.choice(MOVES))
        if encode:
            reply_body(obs, info, done, env.episode_reward(), {"session_id": "x"})
        latencies.append(time.perf_counter() - start)
        if done:
            seed += 1
            env.reset(seed)
    return latencies


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants (MB)."""
    total = 0
    for current in process_tree(pid):
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
        except (OSError, StopIteration, ValueError):
            continue
    return total / 1024


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def row(name: str, sessions: int, latencies: list[float], failed: int, steps_per_s: float) -> str:
    p50, p99 = (np.percentile(np.array(latencies) * 1e3, q) for q in (50, 99)) if latencies else (0.0, 0.0)
    return (
        f"| {name} | {sessions} | {len(latencies)} | {failed} | {p50:.2f} | {p99:.2f} | {steps_per_s:,.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=20, help="steps per session")
    parser.add_argument(
        "--workers", type=int, default=None, help="server worker processes (default: serve's)"
    )
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # two sockets a session, here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * args.sessions + 1024)), hard))

    port = free_port()
    command = [sys.executable, "-m", "vlm_envs.cli", "serve", "sokoban", "--port", str(port)]
    command += ["--max-sessions", str(args.sessions + 64)]
    command += ["--workers", str(args.workers)] if args.workers else []
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as answer:
                    workers = json.loads(answer.read())["workers"]
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start") from None
                time.sleep(0.2)
        url = f"ws://127.0.0.1:{port}/ws"
        load, connect_s, step_s, cpu = asyncio.run(drive(url, args.sessions, args.steps, server.pid))
        memory = rss_mb(server.pid)
    finally:
        server.terminate()
        server.wait(60)

    baseline_steps = max(200, min(2000, args.sessions * args.steps // 4))
    alone, encoded = in_process(baseline_steps, False), in_process(baseline_steps, True)
    print(
        f"vlm-envs serve sokoban ({CONFIG}), {workers} worker(s), {os.cpu_count()} CPUs; "
        f"{args.sessions} sessions opened and reset in {connect_s:.1f} s; server RSS {memory:,.0f} MB; "
        f"{load.resets} episodes ended and were reset"
    )
    print("| path | sessions | steps | failed | step p50 ms | step p99 ms | steps/s |")
    print("|---|---|---|---|---|---|---|")
    print(row("served, WebSocket", args.sessions, load.latencies, load.failed, len(load.latencies) / step_s))
    print(row("in process, env.step", 1, alone, 0, len(alone) / sum(alone)))
    print(row("in process, step + wire encoding", 1, encoded, 0, len(encoded) / sum(encoded)))
    steps = max(1, len(load.latencies))
    print("CPU ms per served step: " + ", ".join(f"{k} {v * 1e3 / steps:.2f}" for k, v in cpu.items()))
    if load.failed:
        print(f"first failure: {load.first_error}")


if __name__ == "__main__":
    main()
