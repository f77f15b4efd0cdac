"""``vlm-envs make-dataset --ray``: rows built by seed ranges on Ray tasks across a cluster.

:class:`RayShards` is a row runner for :func:`vlm_envs.datasets.build.make_dataset`: it cuts the seeds
into contiguous ranges, builds each on a Ray task (one CPU, spread over the nodes; each task builds
its own env) and hands each shard's rows on in seed order, as they are gathered, to the same writer
the local build uses, so the files are byte-identical to it. It joins the cluster this process is
connected to, else ``address``, else ``RAY_ADDRESS``, else starts a local one, in bounded time
(:func:`vlm_envs.rollout.executors.ray_cluster.join`: an address where nothing answers is one line at once).
Importing this module imports ray; only ``--ray`` does.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from vlm_envs.datasets.build import Row, RowBuildError
from vlm_envs.errors import one_line
from vlm_envs.rollout.executors.ray_cluster import ClusterError, join

__all__ = ["RayShards"]

#: Seeds per task at least (each task pays for its own env and imports) and at most (a shard's rows
#: wait in the object store until the rows before them are gathered).
MIN_CHUNK, MAX_CHUNK = 8, 1024
#: Shards per cluster CPU: enough that one slow shard does not leave the others idle at the end.
SHARDS_PER_CPU = 4
#: Shards submitted per cluster CPU ahead of the one being gathered.
IN_FLIGHT_PER_CPU = 2


@ray.remote
def _build_shard(make: Callable[[int, int], list[Row]], first: int, count: int) -> tuple[list[Row], str]:
    return make(first, count), ray.get_runtime_context().get_node_id()


class RayShards:
    """Builds rows on Ray tasks; :meth:`run` is the runner ``make_dataset`` takes.

    ``num_cpus`` is what each task takes. After a run, :attr:`shards` holds each shard's seed range
    and :attr:`node_ids` the Ray node that built it, in seed order.
    """

    def __init__(self, address: str | None = None, *, num_cpus: float = 1.0) -> None:
        if num_cpus <= 0:
            raise ValueError(f"num_cpus must be > 0, got {num_cpus}")
        self.address = address
        self.num_cpus = num_cpus
        self.shards: list[tuple[int, int]] = []
        self.node_ids: list[str] = []

    def run(self, make: Callable[[int, int], list[Row]], seed: int, n: int) -> Iterator[list[Row]]:
        """Rows ``make(first, count)`` for every shard of ``seed .. seed + n - 1``, a shard at a time in
        seed order."""
        cpus = self._join()
        self.shards = shard_ranges(seed, n, cpus)
        self.node_ids = []
        task = _build_shard.options(num_cpus=self.num_cpus, scheduling_strategy="SPREAD")
        make_ref = ray.put(make)
        todo = iter(self.shards)
        pending: deque[tuple[tuple[int, int], Any]] = deque()
        try:
            while True:
                while len(pending) < max(1, int(cpus * IN_FLIGHT_PER_CPU)):
                    shard = next(todo, None)
                    if shard is None:
                        break
                    pending.append((shard, task.remote(make_ref, *shard)))
                if not pending:
                    return
                (first, count), ref = pending.popleft()
                try:
                    shard_rows, node_id = ray.get(ref)
                except RayError as err:
                    raise RowBuildError(f"seeds {first}..{first + count - 1}: {_cause(err)}") from None
                self.node_ids.append(node_id)
                yield shard_rows
        finally:
            for _, ref in pending:  # a failed build stops the rest
                ray.cancel(ref, force=True)

    def _join(self) -> float:
        """Connect to the cluster (see the class) and return its CPUs."""
        try:
            join(self.address, log_to_driver=False)
        except ClusterError as err:
            raise RowBuildError(str(err)) from None
        try:
            return float(ray.cluster_resources().get("CPU", 1.0))
        except (ConnectionError, RuntimeError, ValueError) as err:  # the cluster went away meanwhile
            raise RowBuildError(f"the Ray cluster: {one_line(err)}") from None


def shard_ranges(seed: int, n: int, cpus: float) -> list[tuple[int, int]]:
    """Contiguous ``(first seed, count)`` ranges covering ``seed .. seed + n - 1``."""
    chunk = min(MAX_CHUNK, max(MIN_CHUNK, math.ceil(n / max(1.0, cpus * SHARDS_PER_CPU))))
    return [(first, min(chunk, seed + n - first)) for first in range(seed, seed + n, chunk)]


def _cause(err: RayError) -> str:
    """The original exception of a failed task in one line, else Ray's own error."""
    if isinstance(err, RayTaskError) and err.cause is not None:
        return f"{type(err.cause).__name__}: {one_line(err.cause)}"
    return f"{type(err).__name__}: {one_line(err)}"
