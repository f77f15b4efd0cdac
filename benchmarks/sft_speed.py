"""Demonstrations per second, one row per env and format: oracle play plus writing, on one core.

Each row runs ``make_sft`` (the code behind ``vlm-envs make-sft``) on ``-n`` seeds into a fresh
folder and divides the episodes by the wall time; play alone (the oracle's episodes with no writing)
is the baseline column, so the writing's share is the difference. Every registered env; ``trl``
rows are skipped for envs whose tool replies are images (TRL 1.16 cannot place them). The process
is pinned to one core; an untimed warm-up goes first, and each env plays two untimed episodes.
Run: ``.venv/bin/python benchmarks/sft_speed.py [ENV ...] [-n 50] [--rationale]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from vlm_envs import list_envs
from vlm_envs.sft import FormatError, OracleSource, make_sft
from vlm_envs.sft.sources import oracle_demos

FORMATS = ("trl", "llamafactory", "swift")


def play_rate(source: OracleSource) -> float:
    """Episodes per second of oracle play alone."""
    start = time.perf_counter()
    count = sum(1 for _ in oracle_demos(source, {}))
    return count / (time.perf_counter() - start)


def write_rate(source: OracleSource, fmt: str, root: Path) -> tuple[float, int]:
    """Episodes per second of play and writing, and the rows written."""
    out = root / f"{source.envs[0]}-{fmt}"
    start = time.perf_counter()
    files = make_sft(source, out, fmt=fmt)
    return source.n / (time.perf_counter() - start), files.rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("envs", nargs="*", help="env names (default: every registered env)")
    parser.add_argument("-n", type=int, default=50, help="seeds per env (default 50)")
    parser.add_argument("--rationale", action="store_true", help="oracle replies with their rationales")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    names = args.envs or sorted(spec.name for spec in list_envs())
    print(f"one core, {args.n} seeds per env, rationale={args.rationale}")
    print(f"| env | play only, demos/s | {' | '.join(f'{f}, demos/s (rows)' for f in FORMATS)} |")
    print("|---|---|" + "---|" * len(FORMATS))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_sft(OracleSource((names[0],), 2), root / "warm-up", fmt="trl")  # imports
        for name in names:
            play_rate(OracleSource((name,), 2, max_turns=12))  # the env's caches and grader processes
            source = OracleSource((name,), args.n, max_turns=12, rationale=args.rationale)
            cells = [f"{play_rate(source):.1f}"]
            for fmt in FORMATS:
                try:
                    rate, rows = write_rate(source, fmt, root)
                    cells.append(f"{rate:.1f} ({rows})")
                except FormatError:
                    cells.append("n/a (tool images)")
            print(f"| {name} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
