"""``vlm-envs make-dataset``: parquet rows for slime's ``--prompt-data`` and the matching YAML
(``--trainer verl``: verl's layout, see :mod:`vlm_envs.datasets.verl`; ``--trainer trl``: TRL's,
and a training script, see :mod:`vlm_envs.datasets.trl`).

Geo3k rows come from :mod:`vlm_envs.data.geo3k` (procedural problems, the answer as label): task
rows, without a seed, whose env the hook builds from the sample. Any other env (and Geo3k with a
config) gets one row per seed: its first observation as the prompt, its images, and metadata naming
the env, the seed and the env config, which is all the slime hook needs to replay it (a row with a
seed builds its env from these alone: :mod:`vlm_envs.rollout.rows`).
Columns: ``problem``, ``images``, ``answer``, ``metadata`` (slime's geo3k example layout).

Rows are built by seed range (:class:`RowSpec`) and handed on in seed order, a batch at a time, by a
runner: this process by default, Ray tasks for ``--ray`` (:mod:`vlm_envs.datasets.on_ray`); either way
they stream to the one writer, which holds one row group at a time (memory stays flat however many
rows) and cuts row groups by count, not by batch, so both builds write the same bytes. A curriculum
(``levels``, :mod:`vlm_envs.datasets.curriculum`) gives each row its own ``difficulty``, recorded in the
row's env config.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlm_envs.configured import build_configured_env
from vlm_envs.files import OutputError, replacing, write_atomic
from vlm_envs.imaging import image_column
from vlm_envs.protocol import DEFAULT_MAX_TURNS, SEED_LIMIT
from vlm_envs.registry import get_spec

if TYPE_CHECKING:
    from vlm_envs.datasets.trl import TrlFiles
    from vlm_envs.datasets.verl import VerlFiles

PROMPT_KEY, IMAGES_KEY, LABEL_KEY, METADATA_KEY = "problem", "images", "answer", "metadata"
TRAINERS = ("slime", "verl", "trl")
Row = dict[str, Any]
#: Rows per parquet row group, and per batch a local build makes: the most rows the writer holds.
ROW_GROUP = 64


class RowBuildError(RuntimeError):
    """Rows could not be built where they were sent (no cluster to join, a shard that failed)."""


class OutputExistsError(Exception):
    """make-dataset would replace files that exist, and was not told to (``force``)."""


@dataclasses.dataclass(frozen=True)
class DatasetFiles:
    """What make-dataset wrote, and the slime flags that use it."""

    parquet: Path
    yaml: Path
    rows: int

    def slime_flags(self) -> str:
        """The slime command-line flags for these files."""
        return " \\\n  ".join(
            [
                f"--prompt-data {self.parquet}",
                f"--input-key {PROMPT_KEY} --label-key {LABEL_KEY} --metadata-key {METADATA_KEY}",
                f"--multimodal-keys '{json.dumps({'image': IMAGES_KEY})}'",
                "--custom-generate-function-path vlm_envs.rollout.slime.generate",
                f"--custom-config-path {self.yaml}",
            ]
        )


def env_rows(
    env_name: str, n: int, seed: int, max_turns: int | None, env_config: dict[str, Any]
) -> list[dict[str, Any]]:
    """One row per seed ``seed .. seed + n - 1`` from the env's first observation."""
    env = build_configured_env(env_name, max_turns, env_config)
    rows = []
    try:
        for s in range(seed, seed + n):
            obs, _ = env.reset(seed=s)
            metadata: dict[str, Any] = {"env": env_name, "seed": s}
            if env_config:  # parquet cannot hold an empty struct
                metadata["env_config"] = env_config
            rows.append(
                {
                    PROMPT_KEY: obs.to_dict()["obs_str"],
                    IMAGES_KEY: image_column(obs.images),
                    LABEL_KEY: "",
                    METADATA_KEY: metadata,
                }
            )
    finally:
        env.close()
    return rows


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """What make-dataset writes, one row per seed; picklable, so any process can build a seed range."""

    env_name: str
    seed: int  # the dataset's first seed (verl's ``index`` counts from it)
    max_turns: int | None
    env_config: dict[str, Any]
    trainer: str
    geo3k: bool  # generated geo3k problems (:mod:`vlm_envs.data.geo3k`) rather than env rows
    #: Each row's ``difficulty`` (row ``i`` is seed ``seed + i``; a curriculum's
    #: :class:`~vlm_envs.datasets.curriculum.LevelPlan` computes them on demand), or None: the config alone.
    levels: Sequence[str] | None = None

    def rows(self, first: int, count: int) -> list[Row]:
        """The rows of seeds ``first .. first + count - 1``, each run of one level built with that level."""
        if self.levels is None:
            return self._rows(first, count)
        rows: list[Row] = []
        start = first
        while start < first + count:
            level = self.levels[start - self.seed]
            end = start + 1
            while end < first + count and self.levels[end - self.seed] == level:
                end += 1
            config = {**self.env_config, "difficulty": level}
            rows += dataclasses.replace(self, env_config=config, levels=None)._rows(start, end - start)
            start = end
        return rows

    def _rows(self, first: int, count: int) -> list[Row]:
        if self.trainer == "verl":
            from vlm_envs.datasets.verl import verl_rows

            index = first - self.seed  # within the whole dataset, not within this range
            return verl_rows(self.env_name, count, first, self.max_turns, self.env_config, index)
        if self.trainer == "trl":
            from vlm_envs.datasets.trl import trl_rows

            return trl_rows(self.env_name, count, first, self.max_turns, self.env_config)
        if self.geo3k:
            from vlm_envs.data.geo3k import generated_problems, slime_rows

            turns = {} if self.max_turns is None else {"max_turns": self.max_turns}
            return slime_rows(generated_problems(count, seed=first), **turns)
        return env_rows(self.env_name, count, first, self.max_turns, self.env_config)


#: Builds ``n`` rows from ``seed`` with ``make(first, count)`` calls and yields them in seed order, in
#: batches.
RowRunner = Callable[[Callable[[int, int], list[Row]], int, int], Iterable[list[Row]]]


def run_here(make: Callable[[int, int], list[Row]], seed: int, n: int) -> Iterator[list[Row]]:
    """The default runner: the rows in this process, :data:`ROW_GROUP` at a time."""
    for first in range(seed, seed + n, ROW_GROUP):
        yield make(first, min(ROW_GROUP, seed + n - first))


def write_rows(batches: Iterable[list[Row]], path: Path, expected: int) -> None:
    """The one parquet writer of make-dataset (every trainer's rows; ``images`` as image features):
    streams the batches to ``path`` in row groups of :data:`ROW_GROUP` rows. The columns' types are
    those of the first row group. :class:`RowBuildError` if the batches hold other than ``expected``
    rows.

    The file is replaced whole or not at all (:func:`vlm_envs.files.replacing`).
    """
    written, held = 0, []
    writer: Any = None
    features: Any = None
    # through a Python file, whose errors say why (a full disk, a size limit), as OSError
    with replacing(path) as partial, open(partial, "wb") as sink:
        try:
            for batch in batches:
                held += batch
                while len(held) >= ROW_GROUP:
                    group, held = held[:ROW_GROUP], held[ROW_GROUP:]
                    writer, features = _write_group(group, sink, writer, features)
                    written += len(group)
            if held or writer is None:
                writer, features = _write_group(held, sink, writer, features)
                written += len(held)
        finally:
            if writer is not None:
                writer.close()
        if written != expected:  # the old file stays
            raise RowBuildError(f"the runner built {written} rows, not {expected}")


def _write_group(rows: list[Row], sink: Any, writer: Any, features: Any) -> tuple[Any, Any]:
    """Append one row group (the first opens the file with its types)."""
    import datasets
    import pyarrow.parquet as pq

    if features is None:
        table = datasets.Dataset.from_list(rows)
        features = table.cast_column(IMAGES_KEY, datasets.Sequence(datasets.Image())).features
    arrow = datasets.Dataset.from_list(rows, features=features).data.table
    if writer is None:
        writer = pq.ParquetWriter(sink, features.arrow_schema)
    writer.write_table(
        arrow.replace_schema_metadata(features.arrow_schema.metadata), row_group_size=ROW_GROUP
    )
    return writer, features


def output_files(out: str | Path, trainer: str) -> tuple[Path, Path]:
    """The parquet and the YAML that make-dataset writes for ``out`` and ``trainer``."""
    path = Path(out)
    if trainer == "verl":
        from vlm_envs.datasets.verl import agent_loop_yaml_path

        return path, agent_loop_yaml_path(path)
    if trainer == "trl":
        from vlm_envs.datasets.trl import script_path

        return path, script_path(path)
    return path, path.with_suffix(".yaml")


def check_outputs(out: str | Path, trainer: str, force: bool) -> None:
    """Raise :class:`OutputExistsError` if make-dataset would replace a file and ``force`` is off,
    ``ValueError`` if ``out`` names the YAML itself."""
    parquet, yaml = output_files(out, trainer)
    if parquet == yaml:
        raise ValueError(
            f"--out {str(parquet)!r} is where the YAML goes; give a file name such as train.parquet"
        )
    existing = [str(p) for p in (parquet, yaml) if p.exists()]
    if existing and not force:
        edits = (
            "the training script may hold your edits"
            if trainer == "trl"
            else "a YAML may hold keys you added, such as vlm_envs_workers"
        )
        verb = "exists" if len(existing) == 1 else "exist"
        raise OutputExistsError(
            f"{' and '.join(map(repr, existing))} already {verb} ({edits}): pass --force to replace "
            f"{'it' if len(existing) == 1 else 'them'}, or choose another --out"
        )


def slime_yaml(env_target: str, max_turns: int) -> str:
    """The ``--custom-config-path`` YAML (slime reads these keys from the YAML, not as flags)."""
    return (
        "# slime --custom-config-path: slime reads these keys from this file, not as command-line flags\n"
        f"rollout_interaction_env_path: {env_target}\n"
        f"max_turns: {max_turns}\n"
    )


def make_dataset(
    env_name: str,
    n: int,
    out: str | Path,
    seed: int = 0,
    max_turns: int | None = None,
    env_config: dict[str, Any] | None = None,
    trainer: str = "slime",
    backend: str = "fsdp",
    runner: RowRunner = run_here,
    force: bool = False,
    levels: Sequence[str] | None = None,
) -> DatasetFiles | VerlFiles | TrlFiles:
    """Write ``n`` rows to ``out`` (parquet) and the trainer's YAML next to it.

    For slime (the default) the YAML is ``--custom-config-path``'s (same name, ``.yaml``); for verl
    it is the agent-loop YAML (see :mod:`vlm_envs.datasets.verl`), and ``backend`` picks verl's
    FSDP or Megatron trainer for the printed overrides. ``runner`` says where the rows are built
    (here by default; :class:`vlm_envs.datasets.on_ray.RayShards` for a Ray cluster). Files that
    exist are replaced only with ``force`` (:class:`OutputExistsError`); each file is replaced whole
    or not at all, and one that cannot be written raises :class:`~vlm_envs.files.OutputError`.
    ``levels`` gives row ``i`` the ``difficulty`` ``levels[i]`` (a curriculum: ``Curriculum.plan``).
    """
    if n < 1:
        raise ValueError(f"-n must be at least 1, got {n}")
    if trainer not in TRAINERS:
        raise ValueError(f"--trainer must be one of {TRAINERS}, got {trainer!r}")
    if not (seed >= 0 and seed + n <= SEED_LIMIT):
        raise ValueError(f"--seed must keep the rows' seeds (seed + i) in [0, 2**64), got {seed}")
    env_config = dict(env_config or {})
    check_outputs(out, trainer, force)
    spec = get_spec(env_name)
    path, yaml_path = output_files(out, trainer)
    try:  # an unwritable folder fails before the rows are built
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(f"cannot write {str(path)!r}: {err.strerror or err}") from err
    import datasets  # the data extra

    datasets.disable_progress_bars()  # the command prints its own line
    if trainer == "verl":
        from vlm_envs.datasets.verl import check_backend, write_verl_yaml

        check_backend(backend)
    if levels is not None and len(levels) != n:
        raise ValueError(f"levels names {len(levels)} rows' difficulty, not -n {n}")
    geo3k = trainer == "slime" and spec.name == "geo3k" and not env_config and levels is None
    batches = runner(RowSpec(env_name, seed, max_turns, env_config, trainer, geo3k, levels).rows, seed, n)
    write_rows(batches, path, n)
    if trainer == "verl":
        return write_verl_yaml(path, n, env_name, max_turns, backend)  # type: ignore[arg-type]
    if trainer == "trl":
        from vlm_envs.datasets.trl import write_trl_script

        return write_trl_script(path, n, env_name, max_turns)
    write_atomic(yaml_path, slime_yaml(spec.target, max_turns or DEFAULT_MAX_TURNS))
    return DatasetFiles(parquet=path, yaml=yaml_path, rows=n)
