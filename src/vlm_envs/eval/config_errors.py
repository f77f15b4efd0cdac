"""Why an env refused its config, said in one line that helps: which key, and which keys are valid.

pydantic's own message names the unknown key but not the valid ones; here an unknown key gets the
closest valid key (``did you mean 'grid_size'?``) and the list of valid keys, read from the env's
config model. Any other refusal keeps the env's own words, on one line.
"""

from __future__ import annotations

import difflib
import sys

from pydantic import BaseModel, ValidationError

from vlm_envs.registry import get_spec


def one_line(err: BaseException, limit: int = 300) -> str:
    """An exception's message on one line (pydantic's multi-line errors included)."""
    lines = [line.strip() for line in str(err).splitlines()]
    text = " ".join(line for line in lines if line and not line.startswith("For further information"))
    return (text or type(err).__name__)[:limit]


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
