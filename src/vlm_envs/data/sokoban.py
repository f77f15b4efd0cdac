"""Sokoban data: Boxoban level files, slime-processed rows, and training rows / parquet for slime.

A training row is the env's first observation: ``prompt`` (text with one ``<image>`` placeholder in
vision modes), ``images`` (PNG data URIs, as slime's processed Sokoban rows carry them), ``metadata``
(``env``, ``env_config`` with the fixed ``level`` and its known optimum, the seed and an optimal
solution) and ``optimal_moves``. ``pyarrow`` is imported only by the functions that read or write
parquet (extra ``vlm-envs[data]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from vlm_envs.envs.sokoban import SokobanConfig, SokobanEnv, to_ascii

#: Columns of the rows written here; slime reads them with ``--input-key prompt``,
#: ``--multimodal-keys '{"image": "images"}'`` and ``--metadata-key metadata`` (slime's default).
PROMPT_KEY, IMAGES_KEY, METADATA_KEY = "prompt", "images", "metadata"
#: Metadata column names of slime's processed Sokoban rows (``extra_info``) and of ours.
ROW_METADATA_KEYS = ("metadata", "extra_info")
ENV_NAME = "sokoban"
#: Config keys that choose a level; a row pins its level, so these are not copied into its env_config.
_LEVEL_CHOICE_KEYS = {
    "grid_size",
    "num_boxes",
    "wall_fraction",
    "min_moves",
    "max_moves",
    "rng_seed",
    "level",
    "initial_base_grid",
    "initial_boxes",
    "initial_player",
    "optimal_moves",
    "optimal_exact",
}


def parse_boxoban(text: str) -> list[str]:
    """The levels of a Boxoban text file: blocks of grid lines, each after a ``; <index>`` line."""
    levels: list[str] = []
    block: list[str] = []
    for line in text.splitlines():
        if line.startswith(";"):
            if any(row.strip() for row in block):
                levels.append("\n".join(block).strip("\n"))
            block = []
        elif line.strip() or block:
            block.append(line.rstrip())
    if any(row.strip() for row in block):
        levels.append("\n".join(block).strip("\n"))
    return levels


def load_boxoban(path: str | Path) -> list[str]:
    """Levels from a Boxoban ``.txt`` file, or from every ``.txt`` file under a folder (sorted by path)."""
    root = Path(path)
    files = sorted(root.rglob("*.txt")) if root.is_dir() else [root]
    return [level for file in files for level in parse_boxoban(file.read_text())]


def env_config_from_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """The ``env_config`` of a dataset row (ours under ``metadata``, slime's under ``extra_info``)."""
    for key in ROW_METADATA_KEYS:
        metadata = row.get(key)
        if isinstance(metadata, Mapping) and isinstance(metadata.get("env_config"), Mapping):
            return dict(metadata["env_config"])
    raise ValueError(f"the row has no env_config under any of {ROW_METADATA_KEYS}")


def level_from_row(row: Mapping[str, Any]) -> str:
    """The ASCII level a row pins (``level`` or slime's ``initial_base_grid``/``_boxes``/``_player``)."""
    config = SokobanConfig(**env_config_from_row(row))
    level = config.given_level()
    if level is None:
        raise ValueError("the row's env_config names no fixed level")
    return to_ascii(*level)


def load_slime_levels(path: str | Path) -> list[str]:
    """The ASCII levels of a parquet file of slime-processed (or our) Sokoban rows."""
    import pyarrow.parquet as pq

    return [level_from_row(row) for row in pq.read_table(str(path)).to_pylist()]


def _row(env: SokobanEnv, seed: int, knobs: Mapping[str, Any]) -> dict[str, Any]:
    obs, info = env.reset(seed=seed)
    solution = env.solution() if info["optimal_moves"] is not None else None
    env_config = {
        **knobs,
        "level": info["level"],
        "optimal_moves": info["optimal_moves"],
        "optimal_exact": info["optimal_exact"],
    }
    return {
        PROMPT_KEY: obs.to_dict()["obs_str"],
        IMAGES_KEY: [env.frame_data_uri()] if obs.images else [],
        METADATA_KEY: {
            "env": ENV_NAME,
            "env_config": env_config,
            "seed": seed,
            "source": info["source"],
            "optimal_moves": info["optimal_moves"],
            "optimal_exact": info["optimal_exact"],
            "solution": solution,
        },
        "optimal_moves": info["optimal_moves"],
    }


def _knobs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The user's config minus the keys that choose a level (validated first)."""
    checked = SokobanConfig(**config).model_dump(exclude_unset=True)
    return {k: v for k, v in checked.items() if k not in _LEVEL_CHOICE_KEYS}


def generated_rows(n: int, seed: int = 0, **config: Any) -> list[dict[str, Any]]:
    """``n`` rows of generated levels for seeds ``seed .. seed + n - 1`` (``config`` as for the env)."""
    env = SokobanEnv(SokobanConfig(**config))
    knobs = _knobs(config)
    return [_row(env, seed + i, knobs) for i in range(n)]


def rows_for_levels(levels: Iterable[str], **config: Any) -> list[dict[str, Any]]:
    """One row per ASCII level (e.g. from :func:`load_boxoban`); ``config`` holds the other env keys."""
    knobs = _knobs(config)
    return [_row(SokobanEnv(SokobanConfig(**knobs, level=level)), 0, knobs) for level in levels]


def write_parquet(rows: list[dict[str, Any]], path: str | Path, metadata_key: str = METADATA_KEY) -> Path:
    """Write rows to parquet for slime's ``--prompt-data``; ``metadata_key="extra_info"`` matches
    slime's Sokoban example. Returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ValueError("no rows to write")
    if metadata_key != METADATA_KEY:
        rows = [{(metadata_key if k == METADATA_KEY else k): v for k, v in row.items()} for row in rows]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), str(out))
    return out


__all__ = [
    "env_config_from_row",
    "generated_rows",
    "level_from_row",
    "load_boxoban",
    "load_slime_levels",
    "parse_boxoban",
    "rows_for_levels",
    "write_parquet",
]
