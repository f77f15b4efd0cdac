"""What a dataset row names, read strictly: its env, seed, turn cap and env config.

A row names its episode in a metadata mapping (slime's ``sample.metadata``, verl's ``extra_info``):
``env``, ``seed``, ``max_turns`` and ``env_config``. Rows come in two kinds, told apart by the seed:

- a *generated* row names a ``seed``: the env, the seed and the env config are the whole episode
  (what ``make-dataset`` writes for every env, and what TRL's episode carrier holds). Its env is
  built from them alone, never from the trainer's sample, whose prompt is only the first
  observation the env will show again.
- a *task* row names no seed: the sample is the task (slime's Geo3k rows: problem, images and
  answer; slime's own envs read ``sample.label``), and the env is built from the sample.

A row is data, perhaps downloaded: it never chooses code to run. It may name a registered env (an
entry point's or :func:`vlm_envs.register`'s name, or the module that entry names); a module path
or file only where the trainer's own config lists it (:func:`check_row_env`; TRL's carrier has no
such config: its rows name registered envs only). Its ``env_config`` chooses episodes, never files: a key
the env marks as naming a file, folder or hub id (Geo3k's ``dataset``, Jigsaw's ``image_dir``:
:func:`vlm_envs.envs.config.location_keys`) is refused (:func:`check_row_config`). Nothing is coerced:
a seed of 3.7 or ``True``, or ``max_turns: 0``, is refused, never read as 3, 1 or the default.
Trainer-neutral: this module knows no trainer.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Collection, Mapping
from typing import Any

from vlm_envs.envs.config import ClientConfigError, check_client_config
from vlm_envs.protocol import check_seed
from vlm_envs.registry import get_spec, list_envs

HOW_TO_ALLOW = (
    "a row may name a registered env ({known}); a module path or file only where the trainer's own "
    "config lists it (slime: rollout_interaction_env_path or vlm_envs_allowed_envs in the "
    "--custom-config-path YAML; verl: allowed_envs in the agent-loop YAML), or once it is registered "
    "(an entry point, or vlm_envs.register(name, 'my_pkg.my_env') where the episodes play)"
)


class RowError(ValueError):
    """A row names its episode in a way that is refused (a wrong type, a value out of range, an env
    it may not name)."""


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """The episode a row names (each field ``None`` or empty where it says nothing)."""

    env: str | None = None
    seed: int | None = None
    max_turns: int | None = None
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, metadata: Any) -> RowSpec:
        """Read a row's metadata mapping (``None`` names nothing); :class:`RowError` for a field of
        the wrong type or out of range."""
        if metadata is None:
            return cls()
        if not isinstance(metadata, Mapping):
            raise RowError(f"a row's metadata must be a mapping, got {type(metadata).__name__}")
        env = metadata.get("env")
        if env is not None and (not isinstance(env, str) or not env):
            raise RowError(f"a row's env must be a non-empty string, got {env!r:.80}")
        try:
            seed = check_seed(metadata.get("seed"))
        except (TypeError, ValueError) as err:
            raise RowError(f"a row's {err}") from err
        env_config = metadata.get("env_config")
        if env_config is not None and not isinstance(env_config, Mapping):
            raise RowError(f"a row's env_config must be a mapping, got {type(env_config).__name__}")
        return cls(
            env=env,
            seed=seed,
            max_turns=turn_cap(metadata.get("max_turns"), "a row's max_turns"),
            env_config=dict(env_config or {}),
        )

    @property
    def generated(self) -> bool:
        """Whether the row names a seed: its env, seed and config are the whole episode."""
        return self.seed is not None

    def build_inputs(self, sample: Any) -> tuple[Any, dict[str, Any]]:
        """``(sample, config)`` to build the row's env from: no sample and the row's env config for a
        generated row; the sample (which holds the task and its own env config) for a task row."""
        return (None, dict(self.env_config)) if self.generated else (sample, {})


def turn_cap(value: Any, name: str) -> int | None:
    """``value`` as a turn cap: ``None``, or an int >= 1 (not a bool, a float or a string)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise RowError(f"{name} must be an int >= 1, got {value!r:.80}")
    return int(value)


def allowed_envs(value: Any, name: str) -> frozenset[str]:
    """The module paths and files a trainer's config lets rows name (``name`` is its key): ``None``
    or a list of non-empty strings."""
    if value is None:
        return frozenset()
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Collection):
        raise RowError(f"{name} must be a list of env module paths or files, got {value!r:.80}")
    bad = [v for v in value if not isinstance(v, str) or not v]
    if bad:
        raise RowError(f"{name} must hold non-empty strings, got {bad[0]!r:.80}")
    return frozenset(value)


def check_row_env(env: str, allowed: Collection[str] = ()) -> str:
    """``env`` if a row may name it: a registered env's name or the target its entry names, or one
    of ``allowed`` (what the trainer's own config lists); :class:`RowError` otherwise. Nothing is
    imported to decide."""
    specs = list_envs()
    if env in allowed or any(env in (spec.name, spec.target) for spec in specs):
        return env
    known = ", ".join(spec.name for spec in specs) or "none"
    raise RowError(f"the row names env {env!r:.120}, which is refused: " + HOW_TO_ALLOW.format(known=known))


def check_row_config(env: str, env_config: Mapping[str, Any]) -> None:
    """:class:`RowError` naming the first key of the row's ``env_config`` that no client may set
    (:func:`vlm_envs.envs.config.check_client_config`: a file, folder, hub id, server, token or deadline
    of the env ``env``, which the row may name: :func:`check_row_env`). An env config that sets keys
    loads the env's module to read its marks (it is built next anyway)."""
    if not env_config:
        return
    try:
        check_client_config(get_spec(env).load(), env_config)
    except ClientConfigError as err:
        raise RowError(f"the row's env_config: {err} (rows choose episodes, not files)") from None
