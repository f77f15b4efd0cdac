"""Behaviour digests: proof that a refactor changed nothing the library produces, path by path.

Each source tree runs :mod:`behaviour_paths` in a subprocess (``PYTHONPATH=SRC`` and this checkout's
tests/support, for the slime stand-in and verl's config, as verl_overhead.py uses them), which hashes
(SHA-256), through names that stay put when modules move, what the library makes on every path:

- oracle and random play of every registered env, difficulty and seed: observations (text, role,
  metadata, image mode/size/bytes), ``format_observation``, replies, StepInfo, reset info, system prompt,
  tools, oracle rationale, ``episode_reward``;
- slime's ``generate`` hook (slime stand-in; ``SGLangTestServer`` sends the oracle's tokens, scored by the
  tiny Qwen2-VL), verl's agent loop and TRL's rollout function (a scripted engine sends the oracle's
  tokens) on every env's ``make-dataset`` rows: tokens, masks, log probs, reward, status, records, tensors;
- the CLI (``vlm_envs.cli.main``, what ``python -m vlm_envs.cli`` runs; all commands in one subprocess per
  tree, imports paid once): ``make-dataset`` (slime, verl, trl), ``make-sft`` (trl per env, swift of all),
  ``eval`` (oracle on two envs, random on one): exit codes, stdout, the CLI's own stderr, every file.

A row's digest hashes its items in a fixed order (normalisations: NOTES); ``same`` compares the trees.
Run: ``.venv/bin/python benchmarks/behaviour_digest.py --compare-src /tmp/before/src`` (the baseline tree
from ``git worktree add /tmp/before <commit>``; both trees run at once). Exit status 1 if any row differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from behaviour_paths import NOTES, ROOT, SUPPORT, sha

PATHS = Path(__file__).with_name("behaviour_paths.py")


def combined(cells: dict[str, list]) -> tuple[int, str]:
    """A path's items and digest over its envs' digests, in env order."""
    joined = "".join(f"{env}:{digest}\n" for env, (_, digest) in sorted(cells.items()))
    return sum(items for items, _ in cells.values()), sha(joined.encode())


def table(ours: dict[str, dict], theirs: dict[str, dict] | None, per_env: bool) -> tuple[str, bool]:
    """The Markdown table, and whether every row is the same."""
    head = "| path | items | digest (this tree) | digest (--compare-src) | same |"
    lines, all_same = [head, "|---|---:|---|---|---|"], True
    for path in sorted(set(ours) | set(theirs or {})):
        mine, base = ours.get(path, {}), (theirs or {}).get(path, {})
        cells = [(path, mine, base)]
        if per_env:
            for e in sorted(set(mine) | set(base)):
                cells.append(
                    (f"{path} / {e}", {e: mine[e]} if e in mine else {}, {e: base[e]} if e in base else {})
                )
        for label, a, b in cells:
            (items, digest), (items_b, digest_b) = combined(a), combined(b)
            same = "-" if theirs is None else "yes" if (items, digest) == (items_b, digest_b) else "**NO**"
            all_same &= same != "**NO**"
            count = str(items) if theirs is None or items == items_b else f"{items} / {items_b}"
            other = digest_b[:16] if theirs is not None and b else "-"
            lines.append(f"| {label} | {count} | {digest[:16] if a else '-'} | {other} | {same} |")
    return "\n".join(lines), all_same


def run_workers(srcs: list[str], flags: list[str]) -> list[dict[str, Any]]:
    """behaviour_paths.py on each tree in ``srcs``, all at once; their results."""
    with tempfile.TemporaryDirectory(prefix="behaviour-digest-") as tmp:
        procs = []
        for i, src in enumerate(srcs):
            paths = {"PYTHONPATH": os.pathsep.join([src, str(SUPPORT)]), "TOKENIZERS_PARALLELISM": "false"}
            with open(f"{tmp}/{i}.err", "w") as err:  # a file: a full pipe would stall the worker
                cmd = [sys.executable, str(PATHS), *flags, f"{tmp}/{i}.json"]
                procs.append(subprocess.Popen(cmd, env={**os.environ, **paths}, stderr=err))
        for i, (src, proc) in enumerate(zip(srcs, procs, strict=True)):
            if proc.wait():
                sys.exit(f"the worker on {src} failed:\n{Path(f'{tmp}/{i}.err').read_text()[-4000:]}")
        return [json.loads(Path(f"{tmp}/{i}.json").read_text()) for i in range(len(srcs))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(ROOT / "src"), help="tree to digest (default: this checkout's)")
    parser.add_argument("--compare-src", help="a baseline source tree, digested at the same time")
    parser.add_argument("--seeds", type=int, default=8, help="seeds per env, difficulty and policy of play")
    parser.add_argument("--trainer-seeds", type=int, default=2, help="make-dataset rows per env and trainer")
    parser.add_argument("--per-env", action="store_true", help="a row per env under each path")
    parser.add_argument("--json", type=Path, help="write both trees' digests here")
    args = parser.parse_args()
    started, srcs = time.perf_counter(), [s for s in (args.src, args.compare_src) if s]
    results = run_workers(srcs, ["--seeds", str(args.seeds), "--trainer-seeds", str(args.trainer_seeds)])
    digests = [r["digests"] for r in results]
    text, same = table(digests[0], digests[1] if args.compare_src else None, args.per_env)
    print(f"{time.perf_counter() - started:.0f} s; --seeds {args.seeds} --trainer-seeds {args.trainer_seeds}")
    for label, src, r in zip(("this tree", "--compare-src"), srcs, results, strict=False):
        stages = ", ".join(f"{stage} {s:g} s" for stage, s in r["seconds"].items())
        print(f"{label} {src}: {stages}; episodes won: " + ", ".join(f"{p} {n}" for p, n in r["won"].items()))
    print(f"\n{text}\n\n{NOTES}")
    if args.json:
        args.json.write_text(json.dumps(dict(zip(("this tree", "compare"), digests, strict=False)), indent=1))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
