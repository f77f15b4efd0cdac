"""make-dataset's rows by seed range: any split into ranges writes the bytes of the one-range build
(what lets ``--ray`` shard a build), rows stream to the file a row group at a time, and the local
build never imports ray."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vlm_envs.datasets.build import ROW_GROUP, OutputExistsError, Row, RowBuildError, make_dataset

BUILDS = {
    "sokoban": dict(env_name="sokoban", n=11, seed=4, max_turns=5, env_config={"grid_size": [6, 6]}),
    "geo3k": dict(env_name="geo3k", n=5, seed=2),
    "verl": dict(env_name="sokoban", n=7, seed=30, trainer="verl"),
}


def in_ranges_of(size: int):
    """A runner that builds ``size`` seeds at a time, as Ray shards do."""

    def run(make, seed: int, n: int) -> Iterator[list[Row]]:
        for first in range(seed, seed + n, size):
            yield make(first, min(size, seed + n - first))

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


def test_rows_stream_to_the_file_a_row_group_at_a_time(tmp_path: Path) -> None:
    """When the runner is asked for the row after the first row group, that group is on disk already:
    the writer never holds more than a row group (and the batch that filled it)."""
    out = tmp_path / "train.parquet"
    sizes: list[int] = []

    def one_at_a_time(make, seed: int, n: int) -> Iterator[list[Row]]:
        for first in range(seed, seed + n):
            partial = next(tmp_path.glob(".train.parquet.tmp-*"), None)
            sizes.append(partial.stat().st_size if partial is not None else 0)
            yield make(first, 1)

    n = 2 * ROW_GROUP + 3
    make_dataset("sokoban", n, out, env_config={"grid_size": [5, 5]}, runner=one_at_a_time)
    assert sizes[ROW_GROUP - 1] < sizes[ROW_GROUP] < sizes[2 * ROW_GROUP]  # a group per ROW_GROUP rows
    whole = make_dataset("sokoban", n, tmp_path / "whole.parquet", env_config={"grid_size": [5, 5]})
    assert out.read_bytes() == Path(whole.parquet).read_bytes()


def test_a_runner_that_loses_rows_leaves_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    out.write_bytes(b"the user's file")

    def short(make, seed: int, n: int) -> Iterator[list[Row]]:
        yield make(seed, n - 1)

    with pytest.raises(RowBuildError, match="built 2 rows, not 3"):
        make_dataset("sokoban", 3, out, runner=short, force=True)
    assert out.read_bytes() == b"the user's file"


@pytest.mark.parametrize("trainer", ["slime", "trl"])
def test_rerunning_onto_existing_files_names_what_it_would_replace(trainer: str, tmp_path: Path) -> None:
    """TRL's second file is a training script: the refusal talks about it, never about a YAML."""
    out = tmp_path / "train.parquet"
    files = make_dataset("sokoban", 1, out, trainer=trainer)
    second = files.script if trainer == "trl" else files.yaml
    with pytest.raises(OutputExistsError) as refused:
        make_dataset("sokoban", 1, out, trainer=trainer)
    message = str(refused.value)
    assert repr(str(out)) in message and repr(str(second)) in message and "already exist (" in message
    assert ("YAML" in message) == (trainer != "trl") and ("training script" in message) == (trainer == "trl")
