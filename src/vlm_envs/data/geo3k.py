"""Geo3k data: load hiyouga/geometry3k or slime's processed variants, write slime-ready parquet.

Rows of every variant have ``images`` (a list of images), ``problem`` (text with ``<image>``) and
``answer``; slime's processed variants (e.g. ``VeraIsHere/geo3k_imgurl_processed``) also carry the
tool-protocol prompt in ``problem``. ``datasets`` is imported only inside the functions that need it
(extra ``vlm-envs[data]``).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from vlm_envs.envs.geo3k import Geo3kEnv, Geo3kProblem, generate_problem
from vlm_envs.envs.geo3k.diagrams import DEFAULT_IMAGE_SIZE
from vlm_envs.envs.geo3k.env import DEFAULT_MAX_TURNS
from vlm_envs.envs.geo3k.samples import problem_from_sample

#: The original dataset on the Hugging Face hub (train 2101, validation 300, test 601 rows).
HUB_DATASET = "hiyouga/geometry3k"
#: Columns of slime's geo3k example (``--input-key problem --label-key answer``,
#: ``--multimodal-keys '{"image": "images"}'``); the rows written here use them too.
PROMPT_KEY, LABEL_KEY, IMAGES_KEY, METADATA_KEY = "problem", "answer", "images", "metadata"
ENV_NAME = "geo3k"


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


def generated_problems(
    n: int, seed: int = 0, kinds: Sequence[str] | None = None, image_size: int = DEFAULT_IMAGE_SIZE
) -> list[Geo3kProblem]:
    """``n`` procedurally generated problems, for seeds ``seed .. seed + n - 1``."""
    return [generate_problem(seed + i, kinds, image_size) for i in range(n)]


def _png(image: Any) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


def slime_rows(problems: Iterable[Geo3kProblem], max_turns: int = DEFAULT_MAX_TURNS) -> list[dict[str, Any]]:
    """Rows for slime's ``--prompt-data``: the env's first observation text as the prompt, PNG images,
    the answer as label, and metadata naming the env and its tool schema."""
    rows = []
    for problem in problems:
        env = Geo3kEnv(problem=problem, max_turns=max_turns)
        obs, info = env.reset(0)
        rows.append(
            {
                PROMPT_KEY: obs.to_dict()["obs_str"],
                IMAGES_KEY: [{"bytes": _png(im), "path": None} for im in obs.images],
                LABEL_KEY: problem.answer,
                METADATA_KEY: {
                    "env": ENV_NAME,
                    "env_config": {"max_turns": max_turns},
                    "kind": info["kind"],
                    "source": info["source"],
                    "problem_id": info["problem_id"],
                    "tools": Geo3kEnv.tools(),
                },
            }
        )
    return rows


def write_slime_parquet(
    problems: Iterable[Geo3kProblem], path: str | Path, max_turns: int = DEFAULT_MAX_TURNS
) -> Path:
    """Write :func:`slime_rows` to ``path`` as parquet with ``datasets`` image features; returns the path."""
    import datasets

    rows = slime_rows(problems, max_turns=max_turns)
    if not rows:
        raise ValueError("no problems to write")
    table = datasets.Dataset.from_list(rows)
    table = table.cast_column(IMAGES_KEY, datasets.Sequence(datasets.Image()))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_parquet(str(out))
    return out


__all__ = [
    "HUB_DATASET",
    "generated_problems",
    "load_problems",
    "load_rows",
    "slime_rows",
    "write_slime_parquet",
]
