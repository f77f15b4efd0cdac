"""``vlm-envs eval`` throughput with scripted policies, against a bare env loop measured in the same run.

Baseline: one thread plays the same episodes straight through ``reset``/``step`` (no runner, no
records, no frames, no report), after a warm-up. Then ``run_eval`` at concurrency 1 and 8 (frames as PNG,
results.jsonl, summary and report included), and the two ``make demo`` commands as subprocesses
(interpreter start and imports included: the demo's wall time after install).
Run: ``.venv/bin/python benchmarks/eval_speed.py [--n 64]``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vlm_envs import build_env
from vlm_envs.eval import EvalConfig, run_eval


def bare_loop(env_name: str, n: int) -> float:
    """Seconds to play ``n`` episodes with the scripted policy directly on the env."""
    t0 = time.perf_counter()
    for seed in range(n):
        env = build_env(env_name)
        env.reset(seed=seed)
        done, turn = False, 0
        while not done and turn < 8:
            if env_name == "sokoban":
                text = env.solver_response() or ""  # type: ignore[attr-defined]
            else:
                answer = env.reference_answer  # type: ignore[attr-defined]
                text = env.tool_call(answer) if turn == 0 else f"\\boxed{{{answer}}}"  # type: ignore[attr-defined]
            _, done, _ = env.step(text)
            turn += 1
        env.close()
    return time.perf_counter() - t0


def runner(env_name: str, policy: str, n: int, concurrency: int, out: Path) -> float:
    t0 = time.perf_counter()
    run_eval(EvalConfig(env=env_name, policy=policy, n=n, out=out, concurrency=concurrency))
    return time.perf_counter() - t0


def command(env_name: str, policy: str, n: int, out: Path) -> float:
    script = Path(sys.executable).with_name("vlm-envs")
    t0 = time.perf_counter()
    argv = [str(script), "eval", env_name, "--policy", policy, "-n", str(n), "--out", str(out), "--quiet"]
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for env_name, policy in (("sokoban", "solver"), ("geo3k", "reference")):
            bare_loop(env_name, 2)  # warm-up: imports, the grader's worker pool, caches
            base = bare_loop(env_name, args.n)
            rows.append((env_name, "bare env loop (baseline)", args.n, base, base))
            for k in (1, 8):
                wall = runner(env_name, policy, args.n, k, Path(tmp) / f"{env_name}-{k}")
                rows.append((env_name, f"run_eval, concurrency {k}", args.n, wall, base))
            wall = command(env_name, policy, 32, Path(tmp) / f"{env_name}-demo")
            rows.append((env_name, "`make demo` command (32 episodes)", 32, wall, base * 32 / args.n))
    print(f"{'env':<8} {'setup':<36} {'episodes':>8} {'wall s':>8} {'ep/s':>8} {'vs baseline':>12}")
    for env_name, setup, n, wall, base in rows:
        print(f"{env_name:<8} {setup:<36} {n:>8} {wall:>8.2f} {n / wall:>8.1f} {wall / base:>11.2f}x")


if __name__ == "__main__":
    main()
