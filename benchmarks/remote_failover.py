"""What keeping a served episode's snapshot costs, and what continuing it on another server takes.

Starts two ``vlm-envs serve`` subprocesses (one worker each) and, per env, plays a seeded episode of
``random_response`` replies (``max_turns=64`` where the env takes it) over a raw WebSocket on server A.
At turn 1, 10 and 50 (or where the episode ends, printed):

- ``snapshot B``: the bytes of a ``snapshot`` frame at that turn: what asking the server for the episode's
  snapshot after every step would send per step; ``fetch ms``: that round trip. ``RemoteEnv`` instead asks
  once per episode, right after its reset, and appends the replies itself: 0 bytes and no round trip
  per step.
- ``restore ms``: continuing that snapshot on server B (a reset carrying it: one round trip, the digest, the
  checks and the replay in B's worker); the baseline, measured in the same run, is replaying the episode
  over the wire on B (a reset and every reply as a ``step``: what a client without server-side restore
  does).

Then ``RemoteEnv`` episodes of 8 turns are played with one URL (no snapshot kept) and with two (the snapshot
kept), interleaved, medians of 4 x ``--repeats``: the difference per episode is the one extra round
trip. Other times are medians of ``--repeats``.
Run: ``PYTHONPATH=src .venv/bin/python benchmarks/remote_failover.py [--repeats 5] [NAME ...]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from websockets.sync.client import connect

from load_client import Server, cpu_model, free_port
from vlm_envs import build_env
from vlm_envs.configured import EnvConfigError, build_configured_env
from vlm_envs.remote import RemoteEnv

TURNS = (1, 10, 50)
LONG_EPISODE = {"max_turns": 64}
SEED = 11
EPISODE_TURNS = 8


def call(ws: Any, kind: str, data: dict[str, Any] | None = None) -> str:
    """One request; its reply frame's text (an error frame stops the benchmark)."""
    ws.send(json.dumps({"type": kind, "data": data or {}}))
    text = ws.recv(timeout=60)
    if text.startswith('{"type":"error"') or text.startswith('{"type": "error"'):
        raise SystemExit(f"{kind} failed: {text[:300]}")
    return text


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    spent = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        spent.append((time.perf_counter() - start) * 1e3)
    return statistics.median(spent)


def config_of(name: str) -> dict[str, Any]:
    try:
        build_configured_env(name, None, LONG_EPISODE)
        return LONG_EPISODE
    except EnvConfigError:
        return {}


def replies_of(name: str, config: dict[str, Any], turns: int) -> list[str]:
    """Random replies of the seeded episode, at most ``turns``, stopping before the episode ends."""
    env, rng, replies = build_configured_env(name, None, config), random.Random(SEED), []
    env.reset(SEED)
    while len(replies) < turns:
        reply = env.random_response(rng)
        _, done, _ = env.step(reply)
        if done:
            break
        replies.append(reply)
    return replies


def measure(name: str, url_a: str, url_b: str, repeats: int) -> list[dict[str, Any]]:
    config = config_of(name)
    replies = replies_of(name, config, max(TURNS))
    rows = []
    for turn in sorted({min(t, len(replies)) for t in TURNS}):
        with connect(url_a, proxy=None, max_size=None) as a, connect(url_b, proxy=None, max_size=None) as b:
            call(a, "reset", {"env": name, "seed": SEED, "config": config})
            for reply in replies[:turn]:
                call(a, "step", {"text": reply})
            frame = call(a, "snapshot")
            snapshot = json.loads(frame)["data"]
            fetch = median_ms(lambda a=a: call(a, "snapshot"), repeats)
            restore_data = {"env": name, "config": config, "snapshot": snapshot}
            restore = median_ms(lambda b=b, d=restore_data: call(b, "reset", d), repeats)

            def replay(b: Any = b, turn: int = turn) -> None:
                call(b, "reset", {"env": name, "seed": SEED, "config": config})
                for reply in replies[:turn]:
                    call(b, "step", {"text": reply})

            replayed = median_ms(replay, repeats)
        rows.append(
            {
                "env": name,
                "turn": turn,
                "bytes": len(frame),
                "fetch": fetch,
                "restore": restore,
                "replay": replayed,
            }
        )
    return rows


def episode_ms(url_sets: list[list[str]], name: str, repeats: int) -> list[float]:
    """The median time of one ``RemoteEnv`` episode of :data:`EPISODE_TURNS` random replies, for each of
    ``url_sets`` (the episodes interleaved, so a busy moment of the machine favours none)."""
    config = config_of(name)
    local = build_env(name, **config)
    rng = random.Random(SEED)
    local.reset(SEED)
    replies = []
    for _ in range(EPISODE_TURNS):
        replies.append(local.random_response(rng))
        if local.step(replies[-1])[1]:
            break
    envs = [RemoteEnv(urls, name, **config) for urls in url_sets]
    spent: list[list[float]] = [[] for _ in envs]
    for _ in range(repeats):
        for env, times in zip(envs, spent, strict=True):
            start = time.perf_counter()
            env.reset(SEED)
            for reply in replies:
                env.step(reply)
            times.append((time.perf_counter() - start) * 1e3)
    for env in envs:
        env.close()
    return [statistics.median(times) for times in spent]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=["sokoban", "fog_maze", "sliding_puzzle", "geo3k"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    servers = []
    for label in ("A", "B"):
        command = [sys.executable, "-m", "vlm_envs.cli", "serve", *args.names, "--port", "{port}"]
        server = Server(f"vlm-envs serve {label}", [*command, "--workers", "1"])
        server.start(free_port())
        servers.append(server)
    try:
        url_a, url_b = (server.url for server in servers)
        print(f"CPU: {cpu_model()}; Python {platform.python_version()}; median of {args.repeats}")
        header = (
            f"{'env':<16}{'turn':>5}{'snapshot B':>12}{'fetch ms':>10}{'restore ms':>12}{'replay ms':>11}"
        )
        print(header)
        print("-" * len(header))
        for name in args.names:
            for row in measure(name, url_a, url_b, args.repeats):
                print(
                    f"{row['env']:<16}{row['turn']:>5}{row['bytes']:>12}{row['fetch']:>10.2f}"
                    f"{row['restore']:>12.2f}{row['replay']:>11.2f}"
                )
        http_a, http_b = (url.replace("ws://", "http://").removesuffix("/ws") for url in (url_a, url_b))
        print(
            f"\nRemoteEnv episode of {EPISODE_TURNS} turns (ms): one URL, no snapshot kept / two URLs, kept"
        )
        for name in args.names:
            one, two = episode_ms([[http_a], [http_a, http_b]], name, 4 * args.repeats)
            print(
                f"{name:<16}{one:>10.2f}{two:>10.2f}  ({two - one:+.2f} ms, {100 * (two - one) / one:+.1f}%)"
            )
    finally:
        for server in servers:
            server.stop()


if __name__ == "__main__":
    main()
