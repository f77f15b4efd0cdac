"""make-dataset's rows by seed range: any split into ranges writes the bytes of the one-range build
(what lets ``--ray`` shard a build), and the local build never imports ray."""

import subprocess
import sys
from pathlib import Path

import pytest

from vlm_envs.eval.datasets import Row, make_dataset

BUILDS = {
    "sokoban": dict(env_name="sokoban", n=11, seed=4, max_turns=5, env_config={"grid_size": [6, 6]}),
    "geo3k": dict(env_name="geo3k", n=5, seed=2),
    "verl": dict(env_name="sokoban", n=7, seed=30, trainer="verl"),
}


def in_ranges_of(size: int):
    """A runner that builds ``size`` seeds at a time, as Ray shards do."""

    def run(make, seed: int, n: int) -> list[Row]:
        return [
            row for first in range(seed, seed + n, size) for row in make(first, min(size, seed + n - first))
        ]

    return run


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_a_build_in_seed_ranges_writes_the_bytes_of_the_build_in_one_range(name: str, tmp_path: Path) -> None:
    whole = make_dataset(out=tmp_path / "whole" / "train.parquet", **BUILDS[name])
    split = make_dataset(out=tmp_path / "split" / "train.parquet", runner=in_ranges_of(3), **BUILDS[name])
    assert Path(split.parquet).read_bytes() == Path(whole.parquet).read_bytes()
    assert Path(split.yaml).read_bytes() == Path(whole.yaml).read_bytes()


def test_make_dataset_without_ray_does_not_import_ray(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    code = (
        "import sys; from vlm_envs.cli import main; "
        f"assert main(['make-dataset', 'sokoban', '-n', '2', '--out', {str(out)!r}]) == 0; "
        "assert 'ray' not in sys.modules, 'ray was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert out.exists()
