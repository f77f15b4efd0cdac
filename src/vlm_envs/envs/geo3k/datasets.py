"""Geo3k problems from a dataset: hiyouga/geometry3k or slime's processed variants, local or on the hub.

Rows of every variant have ``images`` (a list of images), ``problem`` (text with ``<image>``) and
``answer``; slime's processed variants (e.g. ``VeraIsHere/geo3k_imgurl_processed``) also carry the
tool-protocol prompt in ``problem``. ``datasets`` is imported only inside the functions that need it
(extra ``vlm-envs[data]``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from vlm_envs.envs.geo3k.problems import Geo3kProblem
from vlm_envs.envs.geo3k.samples import problem_from_sample

#: The original dataset on the Hugging Face hub (train 2101, validation 300, test 601 rows).
HUB_DATASET = "hiyouga/geometry3k"


def _parquet_files(path: Path, split: str) -> list[str]:
    """The parquet files of ``split`` under a local file or folder (``split.parquet`` or hub layout)."""
    if path.is_file():
        return [str(path)]
    for pattern in (
        f"{split}.parquet",
        f"{split}-*.parquet",
        f"data/{split}-*.parquet",
        f"**/{split}*.parquet",
    ):
        found = sorted(str(p) for p in path.glob(pattern))
        if found:
            return found
    raise FileNotFoundError(f"no parquet files for split {split!r} under {path}")


def load_rows(source: str | Path, split: str = "train", limit: int | None = None) -> Any:
    """The rows of a geo3k dataset as a ``datasets.Dataset``, images decoded to PIL.

    ``source`` is a local parquet file or folder, or a hub id such as ``hiyouga/geometry3k``.
    """
    import datasets

    path = Path(source)
    if path.exists():
        rows = datasets.load_dataset("parquet", data_files={split: _parquet_files(path, split)}, split=split)
    else:
        rows = datasets.load_dataset(str(source), split=split)
    if limit is not None:
        rows = rows.select(range(min(limit, len(rows))))
    return rows


def load_problems(source: str | Path, split: str = "train", limit: int | None = None) -> list[Geo3kProblem]:
    """The problems of a geo3k dataset (see :func:`load_rows`), ready for ``Geo3kEnv(problems=...)``."""
    name = Path(source).name if Path(source).exists() else str(source)
    rows = load_rows(source, split=split, limit=limit)
    problems = []
    for i, row in enumerate(rows):
        problem = problem_from_sample(row, source=name)
        problems.append(problem if problem.id else dataclasses.replace(problem, id=f"{name}-{split}-{i}"))
    return problems
