"""Shared fixtures: a third-party env distribution made visible through a real dist-info."""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

SUPPORT = Path(__file__).parent / "support"
sys.path.insert(0, str(SUPPORT))


def write_distribution(root: Path, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Lay out an installed distribution (modules + ``NAME-1.0.dist-info``) under ``root``."""
    for module, source in modules.items():
        (root / f"{module}.py").write_text(source)
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "\n".join(f"{k} = {v}" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[vlm_envs.envs]\n{lines}\n")


@pytest.fixture
def third_party(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two third-party distributions on sys.path: ``colorful-envs`` (good) and ``broken-envs``."""
    write_distribution(
        tmp_path,
        "colorful-envs",
        {"colors": "colorful_envs", "colors-class": "colorful_envs:ColorsEnv"},
        {"colorful_envs": (SUPPORT / "toyenvs" / "colors.py").read_text()},
    )
    write_distribution(
        tmp_path,
        "broken-envs",
        {"broken": "broken_envs_impl", "malformed": "not a module path!"},
        {"broken_envs_impl": "raise ImportError('this env needs a package that is not installed')\n"},
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for module in ("colorful_envs", "broken_envs_impl"):
        sys.modules.pop(module, None)
    shutil.rmtree(tmp_path / "__pycache__", ignore_errors=True)
