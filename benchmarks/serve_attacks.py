"""Served sessions under attack: victims' step latency and losses beside each attack of issue #44.

For each attack a fresh ``vlm-envs serve`` (the real command, a subprocess; ``--src`` picks the
source tree it runs) gets six victim WebSocket sessions playing Sokoban (default config, fixed
moves), a ``/health`` poller (twice a second, 5 s timeout) and the attack, at once, for a fixed
window. Attack traffic comes from 127.0.0.2, the victims and the poller from 127.0.0.1. Each
server runs in a fresh 2.5 GiB memory cgroup (the issue's) when one can be made, and with a soft
file limit of 1,024 (the issue's; the usual default). Only flags both codes know are passed.

A row: victims' step p50; their worst wait for any reply (answered, lost, or still unanswered at the
window's end with its wait so far); steps made; sessions lost (error frame or dropped connection:
the victim then opens a new one); victims waiting over 5 s at the end; ``/health`` worst latency and
failures; server RSS (server and workers) before, peak and after, beside /health's session count
once the victims have closed; worker processes gone; OOM kills in the cgroup; whether the attack got
through (its own test, else: a victim lost or stalled over 5 s, a /health failure, a worker gone or
an OOM kill). Latencies are wall-clock on whatever else the machine runs: compare rows of one run.

Run: ``.venv/bin/python benchmarks/serve_attacks.py --compare-src /tmp/before/src`` (the baseline
tree from ``git worktree add /tmp/before <commit>``, measured in the same run, attack by attack).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import io
import json
import math
import os
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image
from websockets.asyncio.client import connect
from websockets.exceptions import WebSocketException

from serve_attack_harness import (
    ATTACKER,
    HealthStats,
    Row,
    Server,
    VictimStats,
    code_label,
    detail,
    health_sessions,
    http,
    poll_health,
    table,
    victim,
)

#: The issue's configs (issue #44, items 1, 2 and 4).
SOKOBAN_HUGE = {"grid_size": [64, 64], "num_boxes": 12, "solver_max_nodes": 1_000_000, "cell_size": 64}
ZOOM_HUGE = {"canvas": 8064, "view": 4032, "glyph_px": 8}
#: A victim stalled this long counts as harmed.
STALL_S = 5.0
#: A colour no env draws: its pixels coming back mean the file was read.
SECRET = (13, 177, 71)


@dataclass
class Context:
    """What an attack gets: the server, a temp folder, and where it records what happened."""

    server: Server
    tmp: Path
    notes: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    got_through: bool | None = None  # None: judged by the harm to the victims
    waiting: str = ""  # the attacker's request still unanswered

    def text(self) -> str:
        """The notes and counts, one line."""
        return "; ".join([*self.notes, *(f"{k} {v}" for k, v in sorted(self.counts.items()))])


async def timed(ctx: Context, label: str, method: str, path: str, body: object = None) -> tuple[int, bytes]:
    """An attacker's request, noted with its status and seconds; status 0 for no answer."""
    started, ctx.waiting = time.perf_counter(), label
    try:
        status, payload = await http(ctx.server.port, method, path, body, timeout=600)
    except (OSError, asyncio.TimeoutError, ValueError, IndexError) as err:
        status, payload = 0, f"{type(err).__name__}: {err}".encode()
    ctx.waiting = ""
    ctx.notes.append(f"{label} {status or 'no answer'} in {time.perf_counter() - started:.1f} s")
    return status, payload


async def expensive(ctx: Context) -> None:
    """Sokoban 64x64 with 12 boxes and a 1M-node solver budget, then ``state`` (the oracle)."""
    status, body = await timed(ctx, "reset", "POST", "/reset", {"env": "sokoban", "config": SOKOBAN_HUGE})
    if status != 200:
        ctx.notes.append(detail(body)[:90])
        return
    session = json.loads(body)["metadata"]["session_id"]
    status, body = await timed(ctx, "state", "GET", f"/state?session_id={session}")
    if status != 200:
        ctx.notes.append(detail(body)[:90])
    else:
        ctx.notes.append(f"oracle {'answered' if json.loads(body).get('oracle_response') else 'None'}")


async def fifo(ctx: Context) -> None:
    """geo3k whose image path is a FIFO nobody writes."""
    path = ctx.tmp / "fifo.png"
    os.mkfifo(path)
    config = {"images": [{"path": str(path)}], "problem": "x", "answer": "1"}
    status, body = await timed(ctx, "reset", "POST", "/reset", {"env": "geo3k", "config": config})
    ctx.notes.append(detail(body)[:90] if status != 200 else "accepted")


async def memory(ctx: Context, sessions: int = 30, every_s: float = 0.25) -> None:
    """30 zoom_search sessions of an 8064 px canvas opened over ~8 s, each kept open."""

    async def one(index: int) -> None:
        await asyncio.sleep(index * every_s)
        url = f"ws://127.0.0.1:{ctx.server.port}/ws"
        try:
            async with connect(url, ping_interval=None, max_size=None, local_addr=(ATTACKER, 0)) as ws:
                await ws.send(
                    json.dumps({"type": "reset", "data": {"env": "zoom_search", "config": ZOOM_HUGE}})
                )
                ctx.counts["unanswered"] += 1
                reply = json.loads(await ws.recv())
                ctx.counts["unanswered"] -= 1
                if reply["type"] == "observation":
                    ctx.counts["accepted"] += 1
                else:
                    ctx.counts["refused"] += 1
                    if not ctx.notes:
                        ctx.notes.append(f"first refusal: {str(reply['data'].get('message'))[:80]}")
                await asyncio.Future()  # hold the session until the window ends
        except (OSError, WebSocketException, KeyError, ValueError) as err:  # a drop is an outcome
            ctx.counts["dropped"] += 1
            if not ctx.notes:
                ctx.notes.append(f"first drop: {type(err).__name__}")

    await asyncio.gather(*(one(i) for i in range(sessions)))


async def slowloris(ctx: Context, connections: int = 1100) -> None:
    """1,100 connections that send ``GET /hea`` and stall; counts those the server closes."""
    readers = []
    for _ in range(connections):
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", ctx.server.port, local_addr=(ATTACKER, 0)), 5
            )
            writer.write(b"GET /hea")
            readers.append((reader, writer))
            ctx.counts["opened"] += 1
        except (OSError, asyncio.TimeoutError):
            ctx.counts["connect failed"] += 1

    async def watch(reader: asyncio.StreamReader) -> None:
        if not await reader.read(4096):
            ctx.counts["closed by server"] += 1

    try:
        await asyncio.gather(*(watch(reader) for reader, _ in readers), return_exceptions=True)
        await asyncio.Future()
    finally:
        for _, writer in readers:
            writer.close()


async def close_reset_race(ctx: Context, rounds: int = 6, per_round: int = 2) -> None:
    """Per round, sessions each get a heavy ``/reset``, a second one, and a ``/close`` while the first
    runs; afterwards RSS against /health's session count (the victims' six included)."""
    before = ctx.server.rss_mb()
    port = ctx.server.port

    async def answer_of(path: str, body: dict, after_s: float) -> int:
        await asyncio.sleep(after_s)
        try:
            return (await http(port, "POST", path, body, timeout=120))[0]
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            return 0

    async def race(session: str) -> None:
        body = {"env": "zoom_search", "config": ZOOM_HUGE, "session_id": session}
        calls = [("reset", body, 0.0), ("reset", body, 0.05), ("close", {"session_id": session}, 0.25)]
        answers = await asyncio.gather(*(answer_of(f"/{op}", data, at) for op, data, at in calls))
        for (op, _, _), answer in zip(calls, answers, strict=True):
            ctx.counts[f"{op} {answer or 'no answer'}"] += 1

    for _ in range(rounds):
        sessions = []
        for _ in range(per_round):
            status, body = await http(port, "POST", "/reset", {"env": "sokoban"}, timeout=60)
            if status == 200:
                sessions.append(json.loads(body)["metadata"]["session_id"])
        await asyncio.gather(*(race(s) for s in sessions))
    await asyncio.sleep(3)  # the closes' frees reach the workers
    grown = ctx.server.rss_mb() - before
    ctx.notes.append(f"RSS +{grown:,.0f} MB over the rounds, /health sessions {await health_sessions(port)}")
    ctx.got_through = grown > 300


def secret_share(image: Image.Image) -> float:
    """The fraction of ``image``'s pixels in the secret colour (within 3 levels a channel)."""
    pixels = np.asarray(image.convert("RGB"), dtype=np.int16)
    return float((np.abs(pixels - np.array(SECRET)) <= 3).all(axis=-1).mean())


async def file_read(ctx: Context) -> None:
    """geo3k ``images`` naming the benchmark's PNG, jigsaw ``image_dir`` naming its folder; and whether
    an existing PNG, an existing text file and a missing path answer different texts."""
    folder = ctx.tmp / "private"
    folder.mkdir()
    png, txt, missing = folder / "secret.png", folder / "notes.txt", folder / "missing.png"
    Image.new("RGB", (336, 336), SECRET).save(png)
    txt.write_text("not an image\n")
    ctx.got_through = False  # judged by what came back, not by the victims
    answers, back = {}, {"geo3k": False, "jigsaw": False}
    for path in (png, txt, missing):
        config = {"images": [{"path": str(path)}], "problem": "x", "answer": "1"}
        status, body = await timed(
            ctx, f"geo3k {path.name}", "POST", "/reset", {"env": "geo3k", "config": config}
        )
        answers[path.name] = (status, detail(body).replace(str(path), "<path>") if status != 200 else "")
        if path == png and status == 200:
            back["geo3k"] = any(
                secret_share(decode(b)) > 0.5 for b in json.loads(body)["observation"]["images"]
            )
            ctx.got_through = ctx.got_through or back["geo3k"]
    config = {"image_dir": str(folder)}
    status, body = await timed(ctx, "jigsaw", "POST", "/reset", {"env": "jigsaw", "config": config})
    if status == 200:
        back["jigsaw"] = any(secret_share(decode(b)) > 0.3 for b in json.loads(body)["observation"]["images"])
    differ = len(set(answers.values())) > 1
    texts = [t for _, t in answers.values() if t]  # shown from where they first differ
    common = next((i for i, chars in enumerate(zip(*texts, strict=False)) if len(set(chars)) > 1), 0)
    ctx.notes[:] = [
        "pixels back: " + ", ".join(f"{env} {'yes' if came else 'no'}" for env, came in back.items()),
        f"png/txt/missing texts {'differ' if differ else 'alike'}: "
        + " | ".join(f"{s} ...{t[common : common + 40]}" for s, t in answers.values()),
    ]
    ctx.got_through = any(back.values()) or differ


def decode(data: str) -> Image.Image:
    """A wire image (base64 PNG)."""
    return Image.open(io.BytesIO(base64.b64decode(data)))


async def deep_json(ctx: Context, depth: int = 900) -> None:
    """A reset whose config nests 900 objects deep."""
    config: dict = {}
    for _ in range(depth - 1):
        config = {"a": config}
    status, body = await timed(ctx, "reset", "POST", "/reset", {"env": "sokoban", "config": config})
    ctx.notes.append(detail(body)[:80] if status != 200 else "accepted")
    ctx.got_through = status == 0 or status >= 500


@dataclass(frozen=True)
class Attack:
    """An attack, its window and the worker count it runs with (None: ``--workers``)."""

    name: str
    run: Callable[[Context], Awaitable[None]]
    window_s: float
    workers: int | None = None


ATTACKS = {
    a.name: a
    for a in (
        Attack("expensive", expensive, 40, workers=1),
        Attack("fifo", fifo, 30),
        Attack("memory", memory, 40),
        Attack("slowloris", slowloris, 30),
        Attack("close_reset_race", close_reset_race, 60),
        Attack("file_read", file_read, 30),
        Attack("deep_json", deep_json, 15),
    )
}


@dataclass
class Seen:
    """What one window showed: the victims' steps at its end, the poller's record, the attack's notes."""

    victims: VictimStats
    steps: int
    worst_s: float
    stalled: int
    health: HealthStats
    ctx: Context
    sessions_after: int | None = None


async def trial(attack: Attack, server: Server, victims: int, window_s: float, tmp: Path) -> Seen:
    """Victims, the poller and the attack for ``window_s``."""
    stats, health = VictimStats(), HealthStats()
    tasks = [asyncio.ensure_future(victim(server.port, i, stats)) for i in range(victims)]
    tasks.append(asyncio.ensure_future(poll_health(server, health)))
    await asyncio.sleep(2)  # the victims open and step before the attack starts
    stats.latencies.clear()
    stats.longest_wait_s = 0.0
    ctx = Context(server, tmp)
    tasks.append(asyncio.ensure_future(attack.run(ctx)))
    started = time.perf_counter()
    done, _ = await asyncio.wait([tasks[-1]], timeout=window_s)
    await asyncio.sleep(max(0.0, window_s - (time.perf_counter() - started)))  # the victims' full window
    if done and tasks[-1].exception() is not None:
        ctx.notes.append(f"attack failed: {tasks[-1].exception()!r}"[:120])
    elif ctx.waiting:
        ctx.notes.append(f"{ctx.waiting} unanswered at the window's end")
    now = time.perf_counter()
    seen = Seen(stats, len(stats.latencies), stats.worst_s(now), stats.stalled(now, STALL_S), health, ctx)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2)  # closes reach the server
    seen.sessions_after = await health_sessions(server.port)
    return seen


def run_attack(attack: Attack, src: str, args: argparse.Namespace) -> Row:
    """``attack`` against a fresh server running ``src``."""
    workers = attack.workers or args.workers
    window = args.window or attack.window_s
    server = Server(src, workers, args.memory_mb, args.server_nofile)
    try:
        server.wait_healthy()
        before, children = server.rss_mb(), server.children()
        with tempfile.TemporaryDirectory(prefix="serve-attacks-") as tmp:
            seen = asyncio.run(trial(attack, server, args.victims, window, Path(tmp)))
        after, gone, ooms = server.rss_mb(), len(children - server.children()), server.oom_kills()
    finally:
        server.stop()
    victims, health, ctx = seen.victims, seen.health, seen.ctx
    harmed = victims.lost > 0 or seen.worst_s > STALL_S or health.failed > 0 or gone > 0 or bool(ooms)
    note = ctx.text() + (f"; first loss: {victims.first_loss[:100]}" if victims.first_loss else "")
    return Row(
        attack=attack.name,
        code=code_label(src),
        workers=workers,
        window_s=window,
        victim_steps=seen.steps,
        victim_p50_ms=victims.p50_s() * 1e3,
        victim_worst_ms=seen.worst_s * 1e3,
        victims_lost=victims.lost,
        victims_stalled=seen.stalled,
        health_worst_ms=max(health.latencies, default=math.nan) * 1e3,
        health_failed=f"{health.failed}/{len(health.latencies)}",
        rss_before_mb=before,
        rss_peak_mb=max(health.rss_peak_mb, after),
        rss_after_mb=after,
        sessions_after=seen.sessions_after,
        workers_gone=gone,
        oom_kills=ooms,
        got_through=harmed if ctx.got_through is None else ctx.got_through,
        note=note,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = str(Path(__file__).resolve().parent.parent / "src")
    parser.add_argument("--src", default=here, help="source tree the server runs (default: this checkout's)")
    parser.add_argument("--compare-src", help="a baseline source tree, run before --src on every attack")
    parser.add_argument(
        "--attacks", default=",".join(ATTACKS), help="comma-separated, from: " + ", ".join(ATTACKS)
    )
    parser.add_argument("--workers", type=int, default=2, help="server workers (expensive always runs 1)")
    parser.add_argument("--victims", type=int, default=6)
    parser.add_argument("--window", type=float, default=0, help="seconds per attack (default: each its own)")
    parser.add_argument("--memory-mb", type=int, default=2560, help="the server's cgroup limit (0: none)")
    parser.add_argument(
        "--server-nofile", type=int, default=1024, help="the server's soft file limit (0: ours)"
    )
    parser.add_argument("--json", type=Path, help="write the rows here as JSON")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 1,100 slowloris sockets and the victims
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    codes = [c for c in (args.compare_src, args.src) if c]
    rows = []
    for name in args.attacks.split(","):
        for src in codes:
            rows.append(run_attack(ATTACKS[name], src, args))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    cgroup = f"a {args.memory_mb} MiB memory cgroup" if rows[0].oom_kills is not None else "no memory cgroup"
    nofile = args.server_nofile or soft
    print(
        f"\n{args.victims} victims, {os.cpu_count()} CPUs, {cgroup} per server, server file limit {nofile}\n"
    )
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))


if __name__ == "__main__":
    main()
