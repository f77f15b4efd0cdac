"""``vlm-envs list``: every registered env with its description and source distribution."""

from __future__ import annotations

import argparse

from vlm_envs.registry import EnvLoadError, list_envs


def add(sub: argparse._SubParsersAction) -> None:
    """Register the ``list`` command."""
    sub.add_parser("list", help="registered envs with their description and source").set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print every registered env with its description and source distribution."""
    rows = []
    for spec in list_envs():
        try:
            description = spec.describe()
        except EnvLoadError as err:
            description = f"(cannot load: {err})"
        rows.append((spec.name, description, spec.distribution or "(registered at run time)"))
    name_width = max((len(r[0]) for r in rows), default=4)
    text_width = max((len(r[1]) for r in rows), default=0)
    for name, description, dist in rows:
        print(f"{name:<{name_width}}  {description:<{text_width}}  [{dist}]")
    return 0
