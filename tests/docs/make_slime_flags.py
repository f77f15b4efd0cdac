"""Write tests/docs/slime_flags.txt: every command-line flag slime's ``train.py`` parser defines.

slime cannot be installed here (Megatron, SGLang, CUDA), so the docs test checks the slime launch in
docs/slime.md against this file instead. It is made by running the parser-building code itself, not
by reading it: slime's own ``add_slime_arguments`` and ``add_sglang_arguments`` (with SGLang's and
sglang-router's packages replaced by stand-ins whose ``add_cli_args`` add nothing) and Megatron-LM's
``add_megatron_arguments`` (with ``triton`` replaced by a stand-in for Megatron's imports only), at
the Megatron-LM commit slime's ``docker/Dockerfile`` pins, with the Megatron patches slime's image
applies (they add flags such as ``--use-gated-attention`` that slime's model scripts pass). The
flags slime forwards to SGLang (``--sglang-*`` from SGLang's ``ServerArgs``) and to sglang-router
(``--router-*``) are therefore not in the file; the test allows only the few listed in
:data:`SGLANG_BY_HAND`, each checked by hand against the SGLang source named there.

Regenerate (with clones of both repositories; the slime commit is the clone's HEAD, the Megatron-LM
one the commit slime pins, which the Megatron-LM clone must hold; both go into the header)::

    .venv/bin/python tests/docs/make_slime_flags.py --slime ~/src/slime --megatron ~/src/Megatron-LM \\
        > tests/docs/slime_flags.txt

Runs with this project's .venv (torch, transformers, pyyaml); Megatron-LM's ``typing.override``
(Python 3.12) is supplied on 3.11.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import enum
import importlib.abc
import importlib.machinery
import re
import subprocess
import sys
import tempfile
import types
import typing
from pathlib import Path
from unittest import mock

#: Packages that cannot be installed here, replaced by stand-ins while the parsers are built.
STUBBED = {"sglang", "sglang_router", "triton"}
#: Of those, the ones only Megatron-LM may import (torch must keep seeing no triton).
MEGATRON_ONLY = {"triton"}
#: SGLang server flags the docs use, as slime spells them (``--sglang-`` + SGLang's flag), checked by
#: hand: ``mem_fraction_static`` is a field of ``ServerArgs`` in sgl-project/sglang
#: python/sglang/srt/server_args.py (read at commit 001067fffe33427bee0ed2f007fb7551a1d76b44), and
#: slime's own examples pass it (examples/geo3k_vlm/run_geo3k_qwen35.sh).
SGLANG_BY_HAND = ("--sglang-mem-fraction-static",)


class _StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Empty modules for :data:`STUBBED`; every attribute is a MagicMock (calls do nothing)."""

    def find_spec(
        self, name: str, path: object, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = name.split(".")[0]
        if top not in STUBBED or (top == "triton" and name not in ("triton", "triton.language")):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []

        def attribute(attr: str) -> object:
            if attr.startswith("__"):
                raise AttributeError(attr)
            return mock.MagicMock(name=f"{spec.name}.{attr}")

        module.__getattr__ = attribute  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "triton":
            module.jit = lambda fn=None, **_: fn if fn is not None else (lambda g: g)  # type: ignore[attr-defined]
            module.__version__ = "0.0.0"  # type: ignore[attr-defined]


def _install_stand_ins() -> None:
    if not hasattr(typing, "override"):
        typing.override = lambda fn: fn  # type: ignore[attr-defined]
    real_import = builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        caller = (globals or {}).get("__name__", "")
        if level == 0 and name.split(".")[0] in MEGATRON_ONLY and not caller.startswith("megatron"):
            raise ImportError(f"{name}: a stand-in for Megatron-LM only")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    sys.meta_path.insert(0, _StandIns())


def _pre_parse_parser(module: types.ModuleType) -> argparse.ArgumentParser:
    """The parser slime's ``_pre_parse_mode`` builds (flags removed from the main parser)."""
    seen: list[argparse.ArgumentParser] = []
    real = argparse.ArgumentParser.parse_known_args

    def capture(self, args=None, namespace=None):
        seen.append(self)
        return real(self, [], namespace)

    with mock.patch.object(argparse.ArgumentParser, "parse_known_args", capture):
        module._pre_parse_mode()
    return seen[0]


def _describe(action: argparse.Action) -> str:
    """``nargs=N [type=T] [choices=a,b]`` for one action."""
    if action.nargs == 0:
        return "nargs=0"
    words = [f"nargs={action.nargs if action.nargs is not None else 1}"]
    if action.type in (int, float):
        words.append(f"type={action.type.__name__}")
    choices = list(action.choices) if action.choices is not None else []
    if choices and all(isinstance(c, str | int | float) and not isinstance(c, enum.Enum) for c in choices):
        words.append("choices=" + ",".join(str(c) for c in choices))
    return " ".join(words)


def _flags(*parsers: argparse.ArgumentParser) -> dict[str, str]:
    found: dict[str, str] = {}
    for parser in parsers:
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    found.setdefault(flag, _describe(action))
    return found


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True).stdout


def _export(repo: Path, commit: str, into: Path, paths: tuple[str, ...] = ()) -> Path:
    """``repo`` at ``commit`` (only ``paths``, if given) as plain files in ``into``."""
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=_git(repo, "archive", commit, *paths), check=True)
    return into


def _dockerfile_arg(dockerfile: str, name: str) -> str:
    return re.search(rf"^ARG {name}=(\S+)$", dockerfile, re.M).group(1)


def main() -> None:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--slime", type=Path, required=True, help="a clone of THUDM/slime (its HEAD is read)")
    cli.add_argument(
        "--megatron", type=Path, required=True, help="a clone of NVIDIA/Megatron-LM (any commit)"
    )
    where = cli.parse_args()
    slime_commit = _git(where.slime, "rev-parse", "HEAD").decode().strip()
    dockerfile = _git(where.slime, "show", f"{slime_commit}:docker/Dockerfile").decode()
    megatron_commit = _dockerfile_arg(dockerfile, "MEGATRON_COMMIT")
    patch_dir = f"docker/patch/{_dockerfile_arg(dockerfile, 'PATCH_VERSION')}"
    patches = [
        f"{patch_dir}/{name}"
        for name in ("megatron.patch", "megatron-sglang-aligned.patch")  # as slime's Dockerfile applies them
        if name in _git(where.slime, "ls-tree", "--name-only", f"{slime_commit}:{patch_dir}").decode().split()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        slime_dir = _export(where.slime, slime_commit, Path(tmp, "slime"), ("slime",))
        megatron_dir = _export(where.megatron, megatron_commit, Path(tmp, "megatron"))
        for patch in patches:
            text = _git(where.slime, "show", f"{slime_commit}:{patch}")
            subprocess.run(["git", "apply", "-"], cwd=megatron_dir, input=text, check=True)
        sys.path[:0] = [str(slime_dir), str(megatron_dir)]
        _install_stand_ins()
        with contextlib.redirect_stdout(sys.stderr):  # what the imports print is not a flag
            slime_flags, megatron_flags = _read_parsers()
    print("# The flags slime's train.py parser defines, made by tests/docs/make_slime_flags.py from")
    print(f"# slime THUDM/slime@{slime_commit}")
    print(f"# megatron NVIDIA/Megatron-LM@{megatron_commit}")
    print(f"# (the Megatron-LM commit slime's docker/Dockerfile pins, with {', '.join(patches)} applied)")
    print("# Not here: SGLang's own server flags (slime's --sglang-* mirror of SGLang's ServerArgs) and")
    print("# sglang-router's (--router-*); [sglang] lists the few the docs use, each checked by hand.")
    print("# A line: FLAG nargs=N [type=int|float] [choices=a,b,...] (nargs=0: a switch).")
    for section, flags in (("slime", slime_flags), ("megatron", megatron_flags)):
        print(f"[{section}]")
        for flag in sorted(flags):
            print(f"{flag} {flags[flag]}")
    print("[sglang]")
    for flag in SGLANG_BY_HAND:
        print(f"{flag} nargs=1 type=float")


def _read_parsers() -> tuple[dict[str, str], dict[str, str]]:
    """slime's flags (its own, its SGLang glue's, its pre-parse's) and Megatron-LM's others."""

    from megatron.training.arguments import add_megatron_arguments
    from slime.backends.sglang_utils import arguments as sglang_arguments
    from slime.utils import arguments as slime_arguments

    slime_parser = argparse.ArgumentParser(allow_abbrev=False)
    slime_arguments.get_slime_extra_args_provider()(slime_parser)
    sglang_parser = argparse.ArgumentParser(allow_abbrev=False)
    sglang_arguments.add_sglang_arguments(sglang_parser)
    slime_flags = _flags(_pre_parse_parser(slime_arguments), slime_parser, sglang_parser)
    megatron_parser = argparse.ArgumentParser(allow_abbrev=False)
    add_megatron_arguments(megatron_parser)
    megatron_flags = {k: v for k, v in _flags(megatron_parser).items() if k not in slime_flags}
    return slime_flags, megatron_flags


if __name__ == "__main__":
    main()
