"""Finding and building environments.

Environments are found through the entry-point group ``vlm_envs.envs`` (any installed distribution
can add one) and through :func:`register` at run time. An entry point names either a module that
exposes ``build_env(sample=None, args=None, **config)`` or an :class:`~vlm_envs.protocol.Env`
subclass (``"pkg.mod:MyEnv"``). :func:`build_env` also accepts every form slime's
``rollout_interaction_env_path`` takes: a top-level module (``my_env``), a dotted module
(``pkg.my_env``) or a ``.py`` file (``envs/my_env.py``). A module whose ``build_env`` returns a
slime-shaped env (duck-typed ``reset``/``step``, dict observations) is adapted into the protocol by
:class:`vlm_envs.compat.SlimeEnvAdapter`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import inspect
import re
import sys
import types
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlm_envs.compat import SlimeEnvAdapter, is_slime_shaped
from vlm_envs.protocol import Env, resolve_env_config

ENTRY_POINT_GROUP = "vlm_envs.envs"
#: How a file path names an env module (slime's loader takes ``envs/my_env.py`` too).
PY_SUFFIX = ".py"
_TARGET_RE = re.compile(r"^[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?$")
_NAME_RE = re.compile(r"^[A-Za-z][\w-]*$")


class UnknownEnvError(KeyError):
    """No env is registered under the name, and it is not an importable module path."""

    def __str__(self) -> str:
        return str(self.args[0])


class EnvLoadError(ImportError):
    """An env's entry point or module path could not be loaded."""


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What an env is: its name, where it lives, who ships it, and the config it was built with."""

    name: str
    target: str
    distribution: str | None = None
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def gym_id(self) -> str:
        """The gymnasium id, the name in CamelCase: ``vlm_envs/Sokoban-v0``, ``vlm_envs/ZoomSearch-v0``."""
        return f"vlm_envs/{''.join(part[:1].upper() + part[1:] for part in self.name.split('_'))}-v0"

    def load(self) -> Any:
        """Import the target: a module with ``build_env``, an ``Env`` subclass or a factory."""
        module_name, attr = _split_target(self.target)
        owner = f" (from distribution {self.distribution!r})" if self.distribution else ""
        try:
            obj: Any = _import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except Exception as err:  # an env's import can fail in any way; say which env and who ships it
            raise EnvLoadError(
                f"env {self.name!r}{owner}: cannot load {self.target!r}: {type(err).__name__}: {err}"
            ) from err
        if not attr and not callable(getattr(obj, "build_env", None)):
            raise EnvLoadError(f"env {self.name!r}{owner}: module {module_name!r} has no build_env()")
        return obj

    def make(self, sample: Any = None, args: Any = None, **config: Any) -> Env:
        """Build the env; ``config`` overrides the spec's default kwargs (see :func:`build_env`)."""
        target = self.load()
        merged = {**self.kwargs, **config}
        if isinstance(target, type) and issubclass(target, Env):
            env = target(**resolve_env_config(sample, merged))
        else:
            factory = getattr(target, "build_env", target)
            # slime's envs read ``args.max_turns`` unconditionally: give them args even outside a trainer
            args = args if args is not None else types.SimpleNamespace(max_turns=None)
            env = _call_factory(factory, sample, args, merged)
            if not isinstance(env, Env) and is_slime_shaped(env):
                env = SlimeEnvAdapter(env, module=target if isinstance(target, types.ModuleType) else None)
        if not isinstance(env, Env):
            raise TypeError(
                f"env {self.name!r}: {self.target} built {type(env).__name__}, not a vlm_envs Env"
            )
        env.spec = dataclasses.replace(self, kwargs=merged)
        return env

    def describe(self) -> str:
        """The env's one-line description (loads the target): its ``description``, else the first
        line of its docstring (a module's or a class's), else a note saying how to give one."""
        obj = self.load()
        text = getattr(obj, "description", "") or (obj.__doc__ or "")
        if not isinstance(text, str) or not text.strip():
            return "(no description: give the module a docstring or a `description` string)"
        return text.strip().splitlines()[0].strip()


_registered: dict[str, EnvSpec] = {}


def register(name: str, target: str, **kwargs: Any) -> EnvSpec:
    """Register an env in this process under ``name``; ``kwargs`` become its default config.

    The registry knows no gymnasium: :func:`vlm_envs.register` also makes the gymnasium id.
    """
    if not _NAME_RE.match(name):
        raise ValueError(f"env name {name!r} must start with a letter and hold only letters, digits, _ and -")
    if not _TARGET_RE.match(target):
        raise ValueError(f"target {target!r} must look like 'package.module' or 'package.module:Attr'")
    spec = EnvSpec(name=name, target=target, kwargs=dict(kwargs))
    _registered[name] = spec
    return spec


def _entry_point_specs() -> dict[str, EnvSpec]:
    """Entry-point specs, scanned once per ``sys.path`` (a scan reads every installed dist-info)."""
    key = tuple(sys.path)
    if key not in _scans:
        _scans.clear()
        _scans[key] = _scan_entry_points()
    return _scans[key]


_scans: dict[tuple[str, ...], dict[str, EnvSpec]] = {}


def _scan_entry_points() -> dict[str, EnvSpec]:
    specs: dict[str, EnvSpec] = {}
    for ep in md.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        if not _NAME_RE.match(ep.name) or not _TARGET_RE.match(ep.value.replace(" ", "")):
            warnings.warn(
                f"vlm_envs: ignoring malformed entry point {ep.name} = {ep.value!r} from distribution "
                f"{dist!r}: the value must be 'package.module' or 'package.module:Attr'",
                stacklevel=3,
            )
            continue
        if ep.name in specs and specs[ep.name].target != ep.value:
            warnings.warn(
                f"vlm_envs: env {ep.name!r} is declared by both {specs[ep.name].distribution!r} and "
                f"{dist!r}; keeping the first",
                stacklevel=3,
            )
            continue
        specs[ep.name] = EnvSpec(name=ep.name, target=ep.value.replace(" ", ""), distribution=dist)
    return specs


def list_envs() -> list[EnvSpec]:
    """Every known env, sorted by name: entry points, then run-time registrations (which win)."""
    specs = {**_entry_point_specs(), **_registered}
    return [specs[name] for name in sorted(specs)]


def get_spec(name_or_path: str) -> EnvSpec:
    """The spec for ``name_or_path``, tried in this order (the forms slime's loader accepts, and ours):

    a registered name (entry point or :func:`register`); a dotted module path or ``mod:Attr``; a
    top-level module on ``sys.path``; a ``.py`` file (relative to the working directory, or absolute,
    optionally ``file.py:Attr``). A registered name wins over a module of the same name.
    """
    specs = {spec.name: spec for spec in list_envs()}
    if name_or_path in specs:
        return specs[name_or_path]
    module, attr = _split_target(name_or_path)
    if module.endswith(PY_SUFFIX):
        path = Path(module).expanduser().resolve()
        if path.is_file():
            return EnvSpec(name=name_or_path, target=str(path) + (f":{attr}" if attr else ""))
        tried = f"no file {str(path)!r}"
    elif not _TARGET_RE.match(name_or_path):
        tried = "not a module path"
    elif "." in name_or_path or ":" in name_or_path or _find_top_level(name_or_path):
        return EnvSpec(name=name_or_path, target=name_or_path)
    else:
        tried = f"no module {name_or_path!r} on sys.path"
    known = ", ".join(sorted(specs)) or "(none)"
    raise UnknownEnvError(
        f"unknown env {name_or_path!r}: tried the registered envs ({known}), then a module or .py file "
        f"({tried}). Name a registered env, a module with a build_env function ('my_env', "
        f"'my_pkg.my_env'), or a file ('envs/my_env.py')."
    )


def build_env(name_or_path: str, sample: Any = None, args: Any = None, **config: Any) -> Env:
    """Build an env from a registered name or a module path.

    ``sample`` (slime's ``Sample`` or a dataset row) may carry per-sample config in
    ``metadata["env_config"]``; ``args`` are the trainer's args (``max_turns``); ``config`` wins.
    """
    return get_spec(name_or_path).make(sample=sample, args=args, **config)


def _split_target(target: str) -> tuple[str, str]:
    """``(module or file, attribute path)``; a file's own colons (``C:\\...``) are not a separator."""
    head, sep, attr = target.rpartition(":")
    if sep and (head.endswith(PY_SUFFIX) or not target.endswith(PY_SUFFIX)) and re.fullmatch(r"[\w.]+", attr):
        return head, attr
    return target, ""


def _find_top_level(name: str) -> bool:
    """Whether a top-level module ``name`` is importable (finding it imports nothing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _import_module(module: str) -> types.ModuleType:
    """Import a module path, or a ``.py`` file under one stable name per absolute path.

    The same file loads once per process, under the same name in every process (so pickles of its
    objects and worker processes that load it by path agree).
    """
    if not module.endswith(PY_SUFFIX):
        return importlib.import_module(module)
    path = Path(module).resolve()
    digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem)
    name = f"vlm_envs_file_{stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {str(path)!r} as a module")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise
    return loaded


def _call_factory(factory: Any, sample: Any, args: Any, config: Mapping[str, Any]) -> Any:
    """Call ``build_env``: ours take ``sample=``/``args=`` keywords; slime's may take them by position."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C factory: call it our way
        params = {}
    keyword = not params or any(p.kind is p.VAR_KEYWORD for p in params.values()) or "sample" in params
    if keyword:
        return factory(sample=sample, args=args, **config)
    return factory(sample, args, **config)
