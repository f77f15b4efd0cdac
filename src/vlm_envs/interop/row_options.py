"""A row's reset options on the interop routes: its ``options`` and ``difficulty``, as TRL's environment
route and verifiers tasks carry them, given to ``env.reset`` (trainer-neutral; no library imported).

A row (TRL's dataset row, a verifiers task's ``info``) may hold ``options``, a mapping of the env's reset
options (what ``env.reset(seed, options)`` takes: config fields for this episode only), and
``difficulty``, one of the levels every env's config presets (``easy``, ``medium``, ``hard``), which
goes in as the ``difficulty`` option: the episode ``build_env(env, difficulty=LEVEL)`` plays for that
seed, the level ``make-dataset --difficulty`` records per row. Options choose episodes, never files:
a key the env marks as naming a file, folder or server is refused
(:func:`vlm_envs.envs.config.check_client_config`), as on every route a row reaches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlm_envs.envs.config import LEVELS, ClientConfigError, check_client_config


def row_reset_options(row: Mapping[str, Any], target: Any) -> dict[str, Any] | None:
    """The reset options ``row`` gives the env ``target`` (what its registry entry names: a module with
    ``build_env`` or an ``Env`` class; ``None`` where the env plays on a server, which checks them
    itself): its ``options`` with its ``difficulty`` as the ``difficulty`` option, ``None`` where it
    gives neither. Keys set to ``None`` are left out (a dataset column of mappings fills every key
    another row sets with ``None``). A one-line ``ValueError`` for a level that is none of
    :data:`~vlm_envs.envs.config.LEVELS`, a level given twice, options that are not a mapping, or a
    key a row may not set."""
    options, level = row.get("options"), row.get("difficulty")
    if options is None and level is None:
        return None
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"a row's options must be a mapping of reset options, got {type(options).__name__}")
    chosen = {str(key): value for key, value in (options or {}).items() if value is not None}
    if level is not None:
        if level not in LEVELS:
            raise ValueError(f"a row's difficulty must be one of {', '.join(LEVELS)}, got {level!r:.40}")
        if chosen.get("difficulty", level) != level:
            raise ValueError("a row gives its level twice (its difficulty and its options): give it once")
        chosen["difficulty"] = level
    try:
        if target is not None:
            check_client_config(target, chosen)
    except ClientConfigError as err:
        raise ValueError(f"a row's options: {err}") from None
    return chosen or None
