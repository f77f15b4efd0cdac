"""Served sessions under load: ``vlm-envs serve`` against OpenEnv's own server hosting the same env.

The servers, each a subprocess started once, then driven in turn by the same client in this process:

- ``vlm-envs serve sokoban`` (the real command; ``--workers``: serve's default, one per CPU), once per
  worker niceness in ``--niceness`` (a value other than serve's own ``WORKER_NICENESS`` is set by
  renicing its workers once started, which takes root to lower);
- OpenEnv 0.10's own server (``create_app``) hosting the same env, from the same code, with the same
  PNG per observation (``benchmarks/openenv_sokoban.py``) on uvicorn: one process, and ``--workers 2``.

For each count in ``--sessions``, ``--rounds`` times, every server in turn (the order rotated each
round): open that many WebSocket sessions (OpenEnv's ``/ws`` protocol: one connection, one session),
reset each, then every session steps concurrently, replies drawn from the four moves (a finished
episode is reset and counted apart). A request fails on an error frame, a dropped connection or a
timeout; the goal is 0 failed. Latency is send-to-reply as the client sees it, queueing included;
steps/s is all sessions' steps over the stepping phase's wall time; server CPU per step is the user +
system CPU of the server's whole process tree (read from ``/proc``) over the stepping phase, per step.
Rounds are pooled. Ratios are against OpenEnv in one process and under ``uvicorn --workers 2``,
measured in the same run, on the CPU the table names. Also in the same run: the same env stepped in
this process, alone, and stepped then encoded as the server encodes a reply (PNG, base64, JSON).

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/serve_load.py --sessions 1,64,1024 --rounds 3``
(needs ``pip install --no-deps openenv==0.10.0`` beside the ``openenv-client`` extra, as the tests have it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

from load_client import Load, Server, cpu_model, drive, free_port
from vlm_envs import build_env
from vlm_envs.serve.wire import reply_body
from vlm_envs.serve.worker import WORKER_NICENESS

CONFIG = {"grid_size": [6, 6], "num_boxes": 1, "render_mode": "vision"}
MOVES = ["<answer>Up</answer>", "<answer>Down</answer>", "<answer>Left</answer>", "<answer>Right</answer>"]
BENCHMARKS = Path(__file__).resolve().parent
OPENENV, OPENENV_2 = "OpenEnv create_app, 1 process", "OpenEnv create_app, uvicorn --workers 2"


def servers(args: argparse.Namespace, max_sessions: int) -> list[Server]:
    """The servers to compare, not started yet."""
    found = []
    for workers in args.workers:
        for niceness in args.niceness:
            command = [sys.executable, "-m", "vlm_envs.cli", "serve", "sokoban", "--port", "{port}"]
            command += ["--max-sessions", str(max_sessions + 64)]
            command += ["--workers", str(workers)] if workers else []
            renice = None if niceness == WORKER_NICENESS else niceness
            name = f"vlm-envs serve, {workers or 'default'} workers at nice {niceness}"
            found.append(Server(name, command, renice))
    if not args.no_openenv:
        uvicorn = [sys.executable, "-m", "uvicorn", "openenv_sokoban:app", "--app-dir", str(BENCHMARKS)]
        uvicorn += ["--port", "{port}", "--log-level", "warning", "--backlog", "8192"]
        env = {"OPENENV_MAX_SESSIONS": str(max_sessions + 64)}
        found.append(Server(OPENENV, uvicorn, env=env))
        found.append(Server(OPENENV_2, [*uvicorn, "--workers", "2"], env=env))
    return found


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


def percentiles(latencies: list[float]) -> tuple[float, float]:
    """p50 and p99 in ms."""
    if not latencies:
        return 0.0, 0.0
    p50, p99 = np.percentile(np.array(latencies) * 1e3, [50, 99])
    return float(p50), float(p99)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs else "-"


def table(sessions: int, loads: dict[str, Load], cpu: str) -> None:
    """One table: every server at ``sessions`` sessions, with ratios against both OpenEnv rows."""
    print(f"\n{sessions} session(s), on {cpu}")
    print(
        "| server | sessions | steps | failed | step p50 ms | step p99 ms | steps/s | server CPU ms/step "
        "| steps/s ÷ OpenEnv (1 proc / 2 workers) | CPU/step ÷ OpenEnv | p99 ÷ OpenEnv | CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    bases = [loads.get(OPENENV), loads.get(OPENENV_2)]
    for name, load in loads.items():
        p50, p99 = percentiles(load.latencies)
        columns = [name, sessions, len(load.latencies), load.failed, f"{p50:.2f}", f"{p99:.2f}"]
        columns += [f"{load.steps_per_s:,.0f}", f"{load.server_cpu_ms:.3f}"]
        for of in (lambda x: x.steps_per_s, lambda x: x.server_cpu_ms, lambda x: percentiles(x.latencies)[1]):
            columns.append(" / ".join(ratio(of(load), of(b)) if b else "-" for b in bases))
        columns.append(cpu)
        print("| " + " | ".join(map(str, columns)) + " |")
    for name, load in loads.items():
        split = ", ".join(f"{k} {v:.3f}" for k, v in load.cpu_split_ms().items())
        client = f"client {load.client_cpu_ms:.3f}"
        print(f"  {name}: server CPU ms per step: {split}; {client}; {load.resets} resets")
        if load.failed:
            print(f"  {name}: first failure: {load.first_error}")


def verdicts(results: dict[int, dict[str, Load]], ours: str) -> None:
    """The issue's targets for ``ours``, met or missed, against OpenEnv measured here."""
    print(f"\nTargets (issue 47), {ours}:")
    for sessions, loads in results.items():
        load, one, two = loads.get(ours), loads.get(OPENENV), loads.get(OPENENV_2)
        if load is None or one is None or two is None:
            continue
        if load.failed or one.failed or two.failed:  # a failed run measured nothing to compare
            print(f"  {sessions} session(s): not compared (a run had failed requests)")
            continue
        checks = [("CPU/step <= 0.5x OpenEnv's (1 proc)", load.server_cpu_ms <= 0.5 * one.server_cpu_ms)]
        checks.append(
            ("CPU/step <= 0.5x OpenEnv's (2 workers)", load.server_cpu_ms <= 0.5 * two.server_cpu_ms)
        )
        if sessions == 1:
            checks.append(("steps/s >= OpenEnv's (1 proc)", load.steps_per_s >= one.steps_per_s))
            checks.append(
                ("p99 <= OpenEnv's (1 proc)", percentiles(load.latencies)[1] <= percentiles(one.latencies)[1])
            )
        else:
            checks.append(
                ("steps/s >= 1.8x OpenEnv's (2 workers)", load.steps_per_s >= 1.8 * two.steps_per_s)
            )
        said = "; ".join(f"{what}: {'met' if ok else 'missed'}" for what, ok in checks)
        print(f"  {sessions} session(s): {said}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="1,64,1024", help="session counts, comma-separated")
    parser.add_argument("--steps", type=int, default=20, help="steps per session and run, at least")
    parser.add_argument("--min-steps", type=int, default=2000, help="steps per run, at least (all sessions)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per server and session count")
    parser.add_argument("--workers", default="", help="vlm-envs serve's worker processes (default: serve's)")
    parser.add_argument("--niceness", default=str(WORKER_NICENESS), help="vlm-envs serve worker niceness(es)")
    parser.add_argument("--no-openenv", action="store_true", help="vlm-envs serve alone")
    args = parser.parse_args()
    counts = [int(n) for n in args.sessions.split(",")]
    args.niceness = [int(n) for n in args.niceness.split(",")]
    args.workers = [int(n) for n in args.workers.split(",")] if args.workers else [0]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # two sockets a session, here and there
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4 * max(counts) + 4096)), hard))

    everyone = servers(args, max(counts))
    results: dict[int, dict[str, Load]] = {}
    try:
        for server in everyone:
            server.start(free_port())
        for sessions in counts:
            loads = results[sessions] = {server.name: Load() for server in everyone}
            steps = max(args.steps, -(-args.min_steps // sessions))
            for round_ in range(args.rounds):
                turn = round_ % len(everyone)
                for server in everyone[turn:] + everyone[:turn]:
                    asyncio.run(drive(server, sessions, steps, CONFIG, MOVES, loads[server.name]))
        memory = {server.name: server.rss_mb() for server in everyone}
    finally:
        for server in everyone:
            server.stop()

    cpu = cpu_model()
    print(f"sokoban ({json.dumps(CONFIG)}); {args.rounds} round(s), interleaved; client: one asyncio process")
    for sessions, loads in results.items():
        table(sessions, loads, cpu)
    for server in everyone[: len(everyone) - (0 if args.no_openenv else 2)]:
        verdicts(results, server.name)
    print("\nServer RSS at the end (MB): " + "; ".join(f"{k} {v:,.0f}" for k, v in memory.items()))

    baseline_steps = 2000
    alone, encoded = in_process(baseline_steps, False), in_process(baseline_steps, True)
    print(f"\nIn this process, on {cpu}:")
    print("| path | sessions | steps | failed | step p50 ms | step p99 ms | steps/s |")
    print("|---|---|---|---|---|---|---|")
    for name, latencies in (("in process, env.step", alone), ("in process, step + wire encoding", encoded)):
        p50, p99 = percentiles(latencies)
        rate = len(latencies) / sum(latencies)
        print(f"| {name} | 1 | {len(latencies)} | 0 | {p50:.2f} | {p99:.2f} | {rate:,.0f} |")


if __name__ == "__main__":
    main()
