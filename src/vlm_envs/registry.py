"""Finding and building environments.

Environments are found through the entry-point group ``vlm_envs.envs`` (any installed distribution
can add one) and through :func:`register` at run time. An entry point names either a module that
exposes ``build_env(sample=None, args=None, **config)`` or an :class:`~vlm_envs.protocol.Env`
subclass (``"pkg.mod:MyEnv"``). :func:`build_env` also accepts a dotted module path directly, which
is how slime's ``rollout_interaction_env_path`` names an env.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata as md
import re
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from vlm_envs.protocol import Env, resolve_env_config

ENTRY_POINT_GROUP = "vlm_envs.envs"
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
        module_name, _, attr = self.target.partition(":")
        owner = f" (from distribution {self.distribution!r})" if self.distribution else ""
        try:
            obj: Any = importlib.import_module(module_name)
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
            env = factory(sample=sample, args=args, **merged)
        if not isinstance(env, Env):
            raise TypeError(
                f"env {self.name!r}: {self.target} built {type(env).__name__}, not a vlm_envs Env"
            )
        env.spec = dataclasses.replace(self, kwargs=merged)
        return env

    def describe(self) -> str:
        """The env's one-line description (loads the target)."""
        obj = self.load()
        text = getattr(obj, "description", "") or (obj.__doc__ or "")
        return text.strip().splitlines()[0] if text.strip() else ""


_registered: dict[str, EnvSpec] = {}


def register(name: str, target: str, **kwargs: Any) -> EnvSpec:
    """Register an env in this process under ``name``; ``kwargs`` become its default config."""
    if not _NAME_RE.match(name):
        raise ValueError(f"env name {name!r} must start with a letter and hold only letters, digits, _ and -")
    if not _TARGET_RE.match(target):
        raise ValueError(f"target {target!r} must look like 'package.module' or 'package.module:Attr'")
    spec = EnvSpec(name=name, target=target, kwargs=dict(kwargs))
    _registered[name] = spec
    from vlm_envs.gym import register_gym_env  # local: gym builds on the registry

    register_gym_env(spec)
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
    """The spec for a registered name, or one made up for a dotted module path / ``mod:Attr``."""
    specs = {spec.name: spec for spec in list_envs()}
    if name_or_path in specs:
        return specs[name_or_path]
    if ("." in name_or_path or ":" in name_or_path) and _TARGET_RE.match(name_or_path):
        return EnvSpec(name=name_or_path, target=name_or_path)
    known = ", ".join(sorted(specs)) or "(none)"
    raise UnknownEnvError(
        f"unknown env {name_or_path!r}; known envs: {known}. A module path such as "
        f"'my_pkg.my_env' (with a build_env function) works too."
    )


def build_env(name_or_path: str, sample: Any = None, args: Any = None, **config: Any) -> Env:
    """Build an env from a registered name or a module path.

    ``sample`` (slime's ``Sample`` or a dataset row) may carry per-sample config in
    ``metadata["env_config"]``; ``args`` are the trainer's args (``max_turns``); ``config`` wins.
    """
    return get_spec(name_or_path).make(sample=sample, args=args, **config)
