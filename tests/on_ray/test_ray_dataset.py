"""``vlm-envs make-dataset --ray`` on a real two-node cluster: the same files, byte for byte, as the
local build; the shards built on both nodes; failures as one line with exit code 2."""

import re
from pathlib import Path

import pytest
import ray

from vlm_envs.cli import main
from vlm_envs.datasets.build import RowSpec
from vlm_envs.datasets.on_ray import RayShards, shard_ranges

BUILDS = {
    "sokoban": (
        ["sokoban", "-n", "40", "--seed", "7", "--max-turns", "5", "--config", "grid_size=[7,7]"],
        ".yaml",
    ),
    "geo3k": (["geo3k", "-n", "20", "--seed", "3"], ".yaml"),
    "verl": (["sokoban", "-n", "24", "--seed", "100", "--trainer", "verl"], ".agent_loop.yaml"),
}


def alive_nodes() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def build(argv: list[str], out: Path, *extra: str) -> None:
    assert main(["make-dataset", *argv, "--out", str(out), *extra]) == 0


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_the_ray_build_writes_the_bytes_of_the_local_build(
    name: str, ray_cluster: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, yaml_suffix = BUILDS[name]
    local, remote = tmp_path / "local" / "train.parquet", tmp_path / "ray" / "train.parquet"
    build(argv, local)
    assert "built on Ray" not in capsys.readouterr().out
    build(argv, remote, "--ray", ray_cluster)
    printed = capsys.readouterr().out
    assert re.search(r"^built on Ray: [2-9] shards on [12] node\(s\)$", printed, re.MULTILINE), printed
    assert remote.read_bytes() == local.read_bytes()
    assert remote.with_suffix(yaml_suffix).read_bytes() == local.with_suffix(yaml_suffix).read_bytes()


def test_every_shard_reports_its_node_and_the_rows_come_back_in_seed_order(ray_cluster: str) -> None:
    spec = RowSpec("sokoban", 5, None, {"grid_size": [6, 6]}, "slime", geo3k=False)
    shards = RayShards(ray_cluster)
    batches = list(shards.run(spec.rows, 5, 64))  # a shard at a time, as the writer takes them
    rows = [row for batch in batches for row in batch]
    assert [row["metadata"]["seed"] for row in rows] == list(range(5, 69))
    assert [len(batch) for batch in batches] == [count for _, count in shards.shards]
    assert rows == spec.rows(5, 64)
    assert shards.shards == shard_ranges(5, 64, cpus=2.0) and len(shards.shards) == 8
    assert len(shards.node_ids) == len(shards.shards)
    assert set(shards.node_ids) == alive_nodes()


def test_verl_rows_built_in_shards_count_their_index_over_the_whole_dataset(ray_cluster: str) -> None:
    spec = RowSpec("sokoban", 100, 4, {}, "verl", geo3k=False)
    rows = [row for batch in RayShards(ray_cluster).run(spec.rows, 100, 20) for row in batch]
    assert [row["extra_info"]["index"] for row in rows] == list(range(20))
    assert [row["extra_info"]["seed"] for row in rows] == list(range(100, 120))


@pytest.fixture
def driver_only_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An env module this process imports and the cluster's nodes cannot (not on their PYTHONPATH)."""
    (tmp_path / "driver_only_env.py").write_text("from vlm_envs.envs.sokoban import build_env\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return "driver_only_env"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["no-such-env", "-n", "8"], "unknown env 'no-such-env'"),
        (["sokoban", "-n", "8", "--config", "grid_size=9"], "env 'sokoban' rejects its config: grid_size"),
        # the env builds here but not inside the Ray task that builds the first shard
        (["driver_only_env", "-n", "8"], "--ray: seeds 0..7: UnknownEnvError"),
    ],
)
def test_a_failure_with_ray_is_one_line_and_exit_code_2(
    argv: list[str],
    expected: str,
    ray_cluster: str,
    driver_only_env: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "x.parquet"
    code = main(["make-dataset", *argv, "--out", str(out), "--ray", ray_cluster])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith("vlm-envs: error: ") and expected in line, line
    assert not out.exists()


def test_shard_ranges_cover_the_seeds_once_in_order() -> None:
    for seed, n, cpus in [(0, 1, 2.0), (7, 40, 2.0), (3, 100_000, 64.0), (0, 17, 0.5)]:
        ranges = shard_ranges(seed, n, cpus)
        seeds = [s for first, count in ranges for s in range(first, first + count)]
        assert seeds == list(range(seed, seed + n))
        assert all(count >= 1 for _, count in ranges)
