"""``vlm-envs make-dataset``: parquet rows for slime's ``--prompt-data`` and the matching YAML
(``--trainer verl``: verl's layout, see :mod:`vlm_envs.eval.verl_dataset`).

Geo3k rows come from :mod:`vlm_envs.data.geo3k` (procedural problems, the answer as label). Any
other env gets one row per seed: its first observation as the prompt, its images, and metadata
naming the env, the seed and the env config, which is all the slime hook needs to replay it.
Columns: ``problem``, ``images``, ``answer``, ``metadata`` (slime's geo3k example layout).
"""

from __future__ import annotations

import dataclasses
import json
import types
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vlm_envs.imaging import png_bytes
from vlm_envs.protocol import DEFAULT_MAX_TURNS
from vlm_envs.registry import build_env, get_spec

if TYPE_CHECKING:
    from vlm_envs.eval.verl_dataset import VerlFiles

PROMPT_KEY, IMAGES_KEY, LABEL_KEY, METADATA_KEY = "problem", "images", "answer", "metadata"
TRAINERS = ("slime", "verl")


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
    args = types.SimpleNamespace(max_turns=max_turns) if max_turns is not None else None
    env = build_env(env_name, args=args, **env_config)
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
                    IMAGES_KEY: [{"bytes": png_bytes(im), "path": None} for im in obs.images],
                    LABEL_KEY: "",
                    METADATA_KEY: metadata,
                }
            )
    finally:
        env.close()
    return rows


def _write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    import datasets

    table = datasets.Dataset.from_list(rows)
    table = table.cast_column(IMAGES_KEY, datasets.Sequence(datasets.Image()))
    table.to_parquet(str(path))


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
) -> DatasetFiles | VerlFiles:
    """Write ``n`` rows to ``out`` (parquet) and the trainer's YAML next to it.

    For slime (the default) the YAML is ``--custom-config-path``'s (same name, ``.yaml``); for verl
    it is the agent-loop YAML (see :mod:`vlm_envs.eval.verl_dataset`), and ``backend`` picks verl's
    FSDP or Megatron trainer for the printed overrides.
    """
    if n < 1:
        raise ValueError(f"-n must be at least 1, got {n}")
    if trainer not in TRAINERS:
        raise ValueError(f"--trainer must be one of {TRAINERS}, got {trainer!r}")
    env_config = dict(env_config or {})
    spec = get_spec(env_name)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    import datasets  # the data extra

    datasets.disable_progress_bars()  # the command prints its own line
    if trainer == "verl":
        from vlm_envs.eval.verl_dataset import make_verl_dataset

        return make_verl_dataset(env_name, n, path, seed, max_turns, env_config, backend)  # type: ignore[arg-type]
    if spec.name == "geo3k" and not env_config:
        from vlm_envs.data.geo3k import generated_problems, write_slime_parquet

        turns = {} if max_turns is None else {"max_turns": max_turns}
        write_slime_parquet(generated_problems(n, seed=seed), path, **turns)
    else:
        _write_rows(env_rows(env_name, n, seed, max_turns, env_config), path)
    yaml_path = path.with_suffix(".yaml")
    yaml_path.write_text(slime_yaml(spec.target, max_turns or DEFAULT_MAX_TURNS))
    return DatasetFiles(parquet=path, yaml=yaml_path, rows=n)
