"""Building an env from a name, a config and a turn cap, and saying in one line why it refused.

:func:`build_configured_env` is the one way ``eval``, ``make-dataset``, ``make-sft``, the CLI, the
server and the interop adapters build an env from what a user typed: an env that refuses its config
raises :class:`EnvConfigError` with :func:`config_error_text`'s line.

pydantic's own message names the unknown key but not the valid ones; here an unknown key gets the
closest valid key (``did you mean 'grid_size'?``) and the list of valid keys, read from the env's
config model. Any other refusal keeps the env's own words, on one line.
"""

from __future__ import annotations

import difflib
import sys
import types
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from vlm_envs.errors import one_line
from vlm_envs.protocol import Env
from vlm_envs.registry import EnvLoadError, UnknownEnvError, build_env, get_spec


def _config_model(env_name: str, title: str) -> type[BaseModel] | None:
    """The pydantic model named ``title`` in the env's own package (imported by the failed build)."""
    try:
        package = get_spec(env_name).target.partition(":")[0].split(".")[0]
    except Exception:  # the env was found once already; anything odd here only costs the hint
        return None
    for name, module in list(sys.modules.items()):
        if module is None or not (name == package or name.startswith(package + ".")):
            continue
        candidate = getattr(module, title, None)
        if isinstance(candidate, type) and issubclass(candidate, BaseModel) and candidate.__name__ == title:
            return candidate
    return None


def _valid_keys(model: type[BaseModel]) -> list[str]:
    return sorted(field.alias or name for name, field in model.model_fields.items())


def _validation_text(env_name: str, err: ValidationError) -> str:
    model = _config_model(env_name, err.title)
    keys = _valid_keys(model) if model is not None else []
    problems, unknown = [], False
    for item in err.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"])
        if item["type"] == "extra_forbidden" and len(item["loc"]) == 1:
            unknown = True
            close = difflib.get_close_matches(where, keys, n=1)
            problems.append(f"unknown key {where!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        else:
            msg = item["msg"].removeprefix("Value error, ")  # a validator's own words, as it raised them
            problems.append(f"{where}: {msg}" if where else msg)
    text = "; ".join(problems)
    if unknown and keys:
        text += f"; valid keys: {', '.join(keys)}"
    return text


def config_error_text(env_name: str, err: BaseException) -> str:
    """One line saying why env ``env_name`` refused its config, for ``vlm-envs: error: ...``."""
    if isinstance(err, ValidationError):
        reason = _validation_text(env_name, err)
    elif isinstance(err, TypeError | ValueError):
        reason = one_line(err)
    else:  # the env broke on the value rather than refusing it (a bug to report to its author)
        reason = f"{type(err).__name__}: {one_line(err)}"
    return f"env {env_name!r} rejects its config: {reason}"[:600]


class EnvConfigError(ValueError):
    """The env cannot be built with the config given; the message says why in one line."""


def build_configured_env(name: str, max_turns: int | None, env_config: Mapping[str, Any]) -> Env:
    """Env ``name`` built with ``env_config``; ``max_turns`` reaches it as the trainer's ``args.max_turns``.

    An unknown env raises the registry's errors; an env that refuses (or breaks on) its config raises
    :class:`EnvConfigError` saying why in one line, with the valid keys where a key was unknown.
    """
    args = types.SimpleNamespace(max_turns=max_turns) if max_turns is not None else None
    try:
        return build_env(name, args=args, **dict(env_config))
    except (UnknownEnvError, EnvLoadError):
        raise
    except Exception as err:  # an env's constructor can fail in any way on a value it did not expect
        raise EnvConfigError(config_error_text(name, err)) from err
