"""Geo3k env latency: reset (generator), step with a graded tool call, concurrent astep, hostile replies.

Each env figure is printed next to a baseline measured in the same run: reset on a fixed problem
(no generation, no drawing), a bare ``vlm_envs.verify.grade`` / ``agrade`` call on the same answers
(so the env's own overhead is the difference), and the regex scan slime's example env uses to
find tool calls. Run: ``.venv/bin/python benchmarks/geo3k_env.py [--n 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import time
from collections.abc import Callable

from vlm_envs.envs.geo3k import Geo3kEnv, generate_problem
from vlm_envs.envs.geo3k.tool_calls import parse_tool_call
from vlm_envs.verify import agrade, extract_boxed, grade

SLIME_STYLE_RE = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)


def call(answer: str) -> str:
    return (
        "<tool_call>" + json.dumps({"name": "calc_score", "arguments": {"answer": answer}}) + "</tool_call>"
    )


def timed(fn: Callable[[int], object], n: int) -> list[float]:
    """Milliseconds of each of ``n`` calls ``fn(i)``."""
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def summary(name: str, ms: list[float]) -> tuple[str, float, float, int]:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return name, statistics.median(ordered), p99, len(ordered)


def bench_reset(n: int) -> list[tuple[str, float, float, int]]:
    gen = Geo3kEnv()
    fixed = Geo3kEnv(problem=gen.reset(0) and gen.problem)
    return [
        summary("reset: generator (problem + 336 px diagram)", timed(lambda i: gen.reset(i), n)),
        summary("  baseline: reset on a fixed problem", timed(lambda i: fixed.reset(i), n)),
    ]


def bench_step(n: int) -> list[tuple[str, float, float, int]]:
    """Env steps on even seeds and bare grades on the labels of odd seeds, interleaved, so both meet
    the grader's label cache in the same state."""
    env = Geo3kEnv(max_turns=2)
    env_ms, base_ms = [], []
    for i in range(n):
        answer = f"{i}.{i % 7}"
        env.reset(2 * i)
        t0 = time.perf_counter()
        env.step("I think so. " + call(answer))
        env_ms.append((time.perf_counter() - t0) * 1e3)
        truth = generate_problem(2 * i + 1).answer
        t0 = time.perf_counter()
        grade(answer, truth)
        base_ms.append((time.perf_counter() - t0) * 1e3)
    return [
        summary("step: tool call, graded (sync)", env_ms),
        summary("  baseline: bare grade() on the same answers", base_ms),
    ]


def bench_concurrent(n: int, width: int) -> list[tuple[str, float, float, int]]:
    """Rounds of ``width`` concurrent asteps and of ``width`` bare agrade calls, interleaved."""
    envs = [Geo3kEnv(max_turns=2) for _ in range(width)]

    async def one_round(seed0: int, bare: bool) -> float:
        for k, env in enumerate(envs):
            env.reset(seed0 + k)
        t0 = time.perf_counter()
        if bare:
            await asyncio.gather(*(agrade(f"{k}.5", env.reference_answer) for k, env in enumerate(envs)))
        else:
            await asyncio.gather(*(env.astep(call(f"{k}.5")) for k, env in enumerate(envs)))
        return (time.perf_counter() - t0) * 1e3 / width

    async def run() -> tuple[list[float], list[float]]:
        env_ms, base_ms = [], []
        for r in range(max(1, n // width)):
            env_ms.append(await one_round(2 * r * width, bare=False))
            base_ms.append(await one_round((2 * r + 1) * width, bare=True))
        return env_ms, base_ms

    env_ms, base_ms = asyncio.run(run())
    return [
        summary(f"astep: {width} episodes at once (ms per step)", env_ms),
        summary(f"  baseline: {width} bare agrade() at once", base_ms),
    ]


def bench_hostile(n: int) -> list[tuple[str, float, float, int]]:
    reply = "x" * (1 << 20) + '<tool_call>{"name": "calc_score", "arguments": {"answer": ' + "y" * 1000
    env = Geo3kEnv(max_turns=10**6)
    env.reset(0)
    return [
        summary("step: 1 MB reply, broken call (parse only)", timed(lambda i: env.step(reply), n)),
        summary("  baseline: slime-style regex scan", timed(lambda i: SLIME_STYLE_RE.findall(reply), n)),
        summary(
            "  parse_tool_call + extract_boxed alone",
            timed(lambda i: extract_boxed(reply) or parse_tool_call(reply), n),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="calls per row")
    parser.add_argument("--width", type=int, default=32, help="concurrent episodes in the astep row")
    args = parser.parse_args()
    grade("1", "1")  # start the grading workers before timing
    rows = bench_reset(args.n) + bench_step(args.n) + bench_concurrent(args.n, args.width) + bench_hostile(20)
    print(f"{'what':<50} {'median ms':>10} {'p99 ms':>9} {'n':>6}")
    for name, median, p99, count in rows:
        print(f"{name:<50} {median:>10.3f} {p99:>9.3f} {count:>6}")


if __name__ == "__main__":
    main()
