"""Shared fixtures: a third-party env distribution made visible through a real dist-info, and the
tiny Qwen2-VL model behind the SGLang-compatible test server."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from vlm_envs.testing import SGLangTestServer, TinyEngine

SUPPORT = Path(__file__).parent / "support"
sys.path.insert(0, str(SUPPORT))

# Every trajectory and Sample the suite produces, in any process, is checked against the Sample
# contract (vlm_envs.rollout.contract); violations land in this file and fail the test that made them.
CONTRACT_LOG = Path(tempfile.mkdtemp(prefix="vlm-envs-contract-")) / "violations.jsonl"
CONTRACT_LOG.touch()
CONTRACT_LOG_ENV = "VLM_ENVS_CONTRACT_LOG"  # vlm_envs.rollout.contract.LOG_ENV (read without torch here)
os.environ[CONTRACT_LOG_ENV] = str(CONTRACT_LOG)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the test (a tiny model runs faster on one thread than on two shared cores);
    a module asks for it with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def sample_contract() -> Iterator[None]:
    """Fails the test if any trajectory or Sample it produced broke the Sample contract."""
    start = CONTRACT_LOG.stat().st_size
    yield
    with CONTRACT_LOG.open(encoding="utf-8") as log:
        log.seek(start)
        broken = [json.loads(line) for line in log if line.strip()]
    assert not broken, f"the Sample contract was broken: {broken[:3]}"


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


@pytest.fixture(scope="module")
def tiny_engine() -> TinyEngine:
    """The tiny random Qwen2-VL model and its processor (seed 0), built once per test module."""
    from vlm_envs.testing import build_test_engine  # torch and transformers only where needed

    return build_test_engine("qwen2_vl", seed=0)


@pytest.fixture(scope="module")
def sglang_server(tiny_engine: TinyEngine) -> Iterator[SGLangTestServer]:
    """``tiny_engine`` behind the SGLang-compatible HTTP test server on loopback."""
    from vlm_envs.testing import SGLangTestServer

    with SGLangTestServer(tiny_engine) as server:
        yield server


@pytest.fixture(autouse=True)
def no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test's scripted replies and faults are its own: one whose episode ends before it has used
    them all (a puzzle solved in fewer turns than scripted) leaves none for the next test."""
    if "sglang_server" not in request.fixturenames:
        yield
        return
    server = request.getfixturevalue("sglang_server")
    server.clear_faults()
    yield
    server.clear_faults()
