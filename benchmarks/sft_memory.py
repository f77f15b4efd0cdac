"""make-sft's memory and data volume: peak RSS flat in the number of episodes, and what each TRL layout
costs per episode.

Table 1 runs ``vlm-envs make-sft ENV -n N`` in a fresh child process for each N and reads the child's
peak RSS from the kernel (``wait4``); with ``--baseline-src DIR`` the same commands also run on another
source tree (an older commit's ``src``, e.g. from ``git archive 040fb41 src | tar -x -C /tmp/old``),
measured in the same run. Table 2 writes ``-n 6`` episodes in both TRL layouts (one conversation per
episode, and one prompt-completion row per reply with every past turn, ``--history window:CAP``) and
counts rows and image encodings: the images TRL's collator encodes in one epoch, one per image entry
of a row.
Run: ``.venv/bin/python benchmarks/sft_memory.py [--env sokoban] [-N 1 500 5000] [--baseline-src DIR]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def peak_rss(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS in MB and exit code of a child running ``argv``."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def memory_table(
    env_name: str, counts: list[int], fmt: str, trees: dict[str, str | None], root: Path
) -> None:
    print(f"make-sft {env_name} --format {fmt}: peak RSS of the whole process (one child per row)")
    print("| code | N | output MB | peak RSS MB | wall s |")
    print("|---|---|---|---|---|")
    for label, src in trees.items():
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
        for n in counts:
            out = root / f"{label}-{n}"
            argv = [sys.executable, "-m", "vlm_envs.cli", "make-sft", env_name, "-n", str(n), "--format", fmt]
            wall, rss, code = peak_rss([*argv, "--out", str(out)], env)
            cell = f"{size_mb(out):.1f}" if code == 0 else f"failed ({code})"
            print(f"| {label} | {n} | {cell} | {rss:.0f} | {wall:.1f} |", flush=True)


def layout_table(env_name: str, root: Path) -> None:
    import datasets

    from vlm_envs.sft import OracleSource, make_sft

    datasets.disable_progress_bars()
    cap = 100  # above any env's default turn cap: the window keeps every past turn
    source = OracleSource((env_name,), 6)
    print(f"\nmake-sft {env_name} -n 6 --format trl: rows and image encodings per layout")
    print("| layout | rows | image encodings | encodings per episode | images the episodes show |")
    print("|---|---|---|---|---|")
    for label, history in (("one conversation per episode", "full"), ("one row per reply", f"window:{cap}")):
        out = root / f"layout-{history.replace(':', '')}"
        files = make_sft(source, out, fmt="trl", history=history)
        rows = datasets.load_dataset("parquet", data_files=str(out / "train.parquet"))["train"]
        encodings = sum(len(images) for images in rows["images"])
        distinct = len({(r["seed"], i) for r in rows for i in range(len(r["images"]))})
        print(f"| {label} | {files.rows} | {encodings} | {encodings / 6:.1f} | {distinct} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("-N", type=int, nargs="+", default=[1, 500, 5000], help="episode counts")
    parser.add_argument("--format", default="trl")
    parser.add_argument("--baseline-src", help="another source tree's src folder, run as the baseline")
    args = parser.parse_args()
    trees: dict[str, str | None] = {"this tree": None}
    if args.baseline_src:
        trees = {"baseline": args.baseline_src, **trees}
    with tempfile.TemporaryDirectory() as tmp:
        memory_table(args.env, args.N, args.format, trees, Path(tmp))
        layout_table(args.env, Path(tmp))


if __name__ == "__main__":
    main()
