"""Geo3k data: slime-ready parquet from generated or dataset problems.

Loading a geo3k dataset is the env's own job (:mod:`vlm_envs.envs.geo3k.datasets`, re-exported here);
``datasets`` is imported only inside the functions that need it (extra ``vlm-envs[data]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from vlm_envs.envs.geo3k.datasets import HUB_DATASET, load_problems, load_rows
from vlm_envs.envs.geo3k.diagrams import DEFAULT_IMAGE_SIZE
from vlm_envs.envs.geo3k.env import DEFAULT_MAX_TURNS, Geo3kEnv
from vlm_envs.envs.geo3k.problems import Geo3kProblem, generate_problem
from vlm_envs.imaging import image_column

#: Columns of slime's geo3k example (``--input-key problem --label-key answer``,
#: ``--multimodal-keys '{"image": "images"}'``); the rows written here use them too.
PROMPT_KEY, LABEL_KEY, IMAGES_KEY, METADATA_KEY = "problem", "answer", "images", "metadata"
ENV_NAME = "geo3k"


def generated_problems(
    n: int, seed: int = 0, kinds: Sequence[str] | None = None, image_size: int = DEFAULT_IMAGE_SIZE
) -> list[Geo3kProblem]:
    """``n`` procedurally generated problems, for seeds ``seed .. seed + n - 1``."""
    return [generate_problem(seed + i, kinds, image_size) for i in range(n)]


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
                IMAGES_KEY: image_column(obs.images),
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


__all__ = [  # loading is re-exported from the env's own module
    "HUB_DATASET",
    "generated_problems",
    "load_problems",
    "load_rows",
    "slime_rows",
    "write_slime_parquet",
]
