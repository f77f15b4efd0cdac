"""What every ``vlm-envs`` command shares: the one-line usage error, the parser, env options and config."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from vlm_envs.registry import EnvLoadError, UnknownEnvError

if TYPE_CHECKING:
    from vlm_envs.datasets.curriculum import LevelPlan

USAGE_ERROR = 2
#: Exit code after Ctrl-C (128 + SIGINT, as a shell reports it).
INTERRUPTED = 130
#: Exit code when the reader of stdout went away (``vlm-envs list | head``): 128 + SIGPIPE, as a shell
#: reports a command the closed pipe ended.
BROKEN_PIPE = 141
DEFAULT_EPISODES = 32


class UsageError(Exception):
    """A problem with what the user asked for; reported in one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message} (see --help)\n")


def add_env_options(p: argparse.ArgumentParser) -> None:
    """The env, its seed, turn cap and config: the options of every command that builds one env."""
    p.add_argument("env", help="an env name (see `vlm-envs list`) or a module path")
    p.add_argument("--seed", type=int, default=0, help="seed of the (first) episode (default 0)")
    p.add_argument("--max-turns", type=int, default=None, help="turn cap, given to the env as args.max_turns")
    p.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="env config (JSON values)"
    )


def add_difficulty_option(p: argparse.ArgumentParser, item: str) -> None:
    """``--difficulty SPEC``: the level of each of the command's ``item`` (a row, an episode), one level or
    a curriculum (:mod:`vlm_envs.datasets.curriculum`); read with :func:`difficulty_levels`."""
    p.add_argument(
        "--difficulty",
        metavar="SPEC",
        help=f"each {item}'s difficulty level, recorded in its env config: LEVEL (every {item}), a mix by "
        f"share (easy:0.5,medium:0.3,hard:0.2, in an order drawn from --seed) or schedule:easy..hard "
        f"({item}s ordered from easy to hard)",
    )


def difficulty_levels(spec: str | None, n: int, seed: int, config: dict[str, Any]) -> LevelPlan | None:
    """The level of each of ``n`` rows (:func:`vlm_envs.datasets.curriculum.curriculum_plan`), ``None``
    without ``--difficulty``; :class:`UsageError` for a bad spec or a level given twice."""
    from vlm_envs.datasets.curriculum import curriculum_plan

    try:
        return curriculum_plan(spec, n, seed, config)
    except ValueError as err:
        raise UsageError(str(err)) from err


def env_config(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as a config dict; a value is JSON where it parses, else a string."""
    config: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--config takes KEY=VALUE, got {pair!r}")
        try:
            config[key] = json.loads(value)
        except json.JSONDecodeError:
            config[key] = value
    return config


def build_env(name: str, max_turns: int | None, config: dict[str, Any]) -> Any:
    """The env as the command line asks for it; :class:`UsageError` saying why it cannot be built."""
    from vlm_envs.configured import EnvConfigError, build_configured_env

    try:
        return build_configured_env(name, max_turns, config)
    except (UnknownEnvError, EnvLoadError, EnvConfigError) as err:
        raise UsageError(str(err)) from err
