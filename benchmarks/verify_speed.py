"""Latency and throughput of answer checking on geometry-style answers.

Prints median / p99 latency and calls/s for: plain math-verify parse+verify in-process (the baseline,
what the reference graders run), ``grade_local`` in-process, and ``grade`` / ``agrade`` through the
worker pool from one caller, from 8 threads, from asyncio, and from one caller while 8 threads keep
slow answers (each killed at a 3 s limit) in flight. Each row grades its own corpus of the same shape
(values drawn afresh, so no row profits from another's caches) after a common warm-up.
Run: ``.venv/bin/python benchmarks/verify_speed.py [--n 400] [--workers 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from math_verify import parse, verify

from vlm_envs.verify import agrade, configure, grade, grade_local


def corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` distinct (prediction, label) pairs shaped like geo3k answers and model outputs."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        a, b = int(rng.integers(2, 10_000)), int(rng.integers(2, 1000))
        kind = i % 6
        if kind == 0:
            label, pred = f"{a}\\sqrt{{{b}}}", f"\\boxed{{{a * np.sqrt(b):.2f}}}"
        elif kind == 1:
            label, pred = f"{a / b:.2f}", f"\\boxed{{\\frac{{{a}}}{{{b}}}}}"
        elif kind == 2:
            label, pred = str(a + 100 * b), f"m\\angle C = {a + 100 * b}^\\circ"
        elif kind == 3:
            label, pred = f"{a}\\pi", f"The answer is $ {a}π $ cm."
        elif kind == 4:
            label, pred = f"{a + b / 10:.1f}", f"\\boxed{{{a + b / 10 + 0.04:.2f}}}"
        else:
            label, pred = str(a * b), f"\\boxed{{{a * b + 1}}}"
        pairs.append((pred, label))
    return pairs


def baseline(prediction: str, label: str) -> bool:
    """The reference graders' check: math-verify defaults (SIGALRM timeouts, main thread only)."""
    return verify(parse("\\boxed{" + label + "}"), parse(prediction))


def latencies(fn: Callable[[str, str], object], pairs: list[tuple[str, str]]) -> tuple[list[float], float]:
    start = time.perf_counter()
    times = []
    for pred, label in pairs:
        t = time.perf_counter()
        fn(pred, label)
        times.append(time.perf_counter() - t)
    return times, time.perf_counter() - start


def threaded(pairs: list[tuple[str, str]], threads: int) -> tuple[list[float], float]:
    def one(pair: tuple[str, str]) -> float:
        t = time.perf_counter()
        grade(*pair)
        return time.perf_counter() - t

    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        times = list(pool.map(one, pairs))
    return times, time.perf_counter() - start


def asynchronous(pairs: list[tuple[str, str]], in_flight: int) -> tuple[list[float], float]:
    async def main() -> list[float]:
        gate = asyncio.Semaphore(in_flight)

        async def one(pair: tuple[str, str]) -> float:
            async with gate:
                t = time.perf_counter()
                await agrade(*pair)
                return time.perf_counter() - t

        return await asyncio.gather(*(one(p) for p in pairs))

    start = time.perf_counter()
    times = asyncio.run(main())
    return times, time.perf_counter() - start


#: An answer sympy needs about 4 s for; graded with a 3 s limit it holds a worker until it is killed.
SLOW = (r"\frac{(x+1)^{60}}{(x-1)^{60}}", r"\frac{(x+2)^{60}}{(x-2)^{60}}")


def behind_slow(pairs: list[tuple[str, str]], slow: int) -> tuple[list[float], float]:
    """One caller's latencies while ``slow`` threads keep a slow answer each in flight."""
    done = threading.Event()

    def keep_busy() -> None:
        while not done.is_set():
            grade(*SLOW, timeout=3.0)

    busy = [threading.Thread(target=keep_busy) for _ in range(slow)]
    for thread in busy:
        thread.start()
    time.sleep(0.5)
    try:
        return latencies(grade, pairs)
    finally:
        done.set()
        for thread in busy:
            thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400, help="calls per row")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    configure(workers=args.workers)
    for pred, label in corpus(60, seed=1000):  # start the workers and warm every checker once
        baseline(pred, label)
        grade_local(pred, label)
        grade(pred, label)
    rows = [
        ("math-verify parse+verify, in-process (baseline)", lambda p: latencies(baseline, p)),
        ("grade_local, in-process", lambda p: latencies(grade_local, p)),
        ("grade, pool, 1 caller", lambda p: latencies(grade, p)),
        ("grade, pool, 8 threads", lambda p: threaded(p, 8)),
        ("agrade, pool, asyncio, 16 in flight", lambda p: asynchronous(p, 16)),
        ("grade, pool, 1 caller, 8 slow answers in flight", lambda p: behind_slow(p, 8)),
    ]
    print(f"{args.n} calls per row, {args.workers} pool workers, {os.cpu_count()} CPUs")
    print(f"| {'checker':<48} | median ms | p99 ms | calls/s |")
    print(f"|{'-' * 50}|-----------|--------|---------|")
    for seed, (name, run) in enumerate(rows):
        times, wall = run(corpus(args.n, seed))
        ms = sorted(t * 1000 for t in times)
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        print(f"| {name:<48} | {statistics.median(ms):9.2f} | {p99:6.1f} | {len(ms) / wall:7.0f} |")


if __name__ == "__main__":
    main()
