"""make-dataset rows/s: the local build and ``--ray`` on a local cluster of this machine's cores.

Each build writes ``-n`` Sokoban (or ``--env``) rows through ``make_dataset``, once in this process
and once sharded over Ray tasks (``RayShards``), and checks the two files are byte-identical. Times
are wall clock of the whole build (rows, PNG encoding, parquet); the Ray row includes its tasks'
start-up on warm workers (one warm-up build first) but not the cluster's start.

Run: ``.venv/bin/python benchmarks/dataset_build.py`` (needs the ``ray`` extra).

On the 2-core machine this was written on (shared with other jobs), ``-n 1000``:

| build | seconds | rows/s | speed-up |
|---|---|---|---|
| local (this process) | 2.45 | 407 | 1.00 |
| Ray, 8 shards on 2 CPUs | 1.74 | 574 | 1.41 |
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from vlm_envs.datasets.build import make_dataset

#: Ray's object store for the local cluster this script starts (small: the machine may be shared).
OBJECT_STORE_BYTES = 300_000_000


def timed_build(env: str, n: int, out: Path, **kwargs: object) -> float:
    start = time.perf_counter()
    make_dataset(env, n, out, **kwargs)  # type: ignore[arg-type]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="sokoban")
    parser.add_argument("-n", type=int, default=2000, help="rows per build")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a throwaway local cluster: no token in ~/.ray
    import ray

    from vlm_envs.datasets.on_ray import RayShards

    cores = os.cpu_count() or 1
    ray.init(
        num_cpus=cores, include_dashboard=False, object_store_memory=OBJECT_STORE_BYTES, log_to_driver=False
    )
    shards = RayShards()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        timed_build(args.env, 16 * cores, folder / "warm.parquet", runner=shards.run)  # start the workers
        local = timed_build(args.env, args.n, folder / "local.parquet")
        remote = timed_build(args.env, args.n, folder / "ray.parquet", runner=shards.run)
        same = (folder / "local.parquet").read_bytes() == (folder / "ray.parquet").read_bytes()
    ray.shutdown()
    print(f"{args.n} {args.env} rows, {cores} cores; files byte-identical: {same}\n")
    print("| build | seconds | rows/s | speed-up |")
    print("|---|---|---|---|")
    print(f"| local (this process) | {local:.2f} | {args.n / local:.0f} | 1.00 |")
    print(
        f"| Ray, {len(shards.shards)} shards on {cores} CPUs | {remote:.2f} | {args.n / remote:.0f} "
        f"| {local / remote:.2f} |"
    )


if __name__ == "__main__":
    main()
