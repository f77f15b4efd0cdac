"""The worked example of docs/writing_an_env.md, installed as a third-party distribution.

``tests/support/thirdparty/shapes_envs.py`` is laid out with a real ``shapes_envs-1.0.dist-info``
(entry point ``shapes = "shapes_envs"``, a module) in a temporary folder on ``sys.path``; it then
passes ``check_env`` and runs under ``vlm-envs list`` and ``vlm-envs eval`` in their own processes.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vlm_envs import build_env, list_envs
from vlm_envs.checker import check_env

EXAMPLE = Path(__file__).parent / "support" / "thirdparty" / "shapes_envs.py"
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def shapes_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(EXAMPLE, site / "shapes_envs.py")
    info = site / "shapes_envs-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shapes-envs\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[vlm_envs.envs]\nshapes = shapes_envs\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    yield site
    sys.modules.pop("shapes_envs", None)


def _cli(site: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(site)])}
    cmd = [sys.executable, "-m", "vlm_envs.cli", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, env=environ, cwd=cwd, timeout=300)


def test_the_worked_example_is_found_and_passes_check_env(shapes_dist: Path) -> None:
    (spec,) = [s for s in list_envs() if s.name == "shapes"]
    assert (spec.distribution, spec.target, spec.gym_id) == (
        "shapes-envs",
        "shapes_envs",
        "vlm_envs/Shapes-v0",
    )
    check_env(build_env("shapes"))  # rebuilds it in another process too


def test_the_worked_example_takes_options_and_per_sample_config(shapes_dist: Path) -> None:
    env = build_env("shapes", sample={"metadata": {"env_config": {"max_shapes": 3}}})
    assert env.max_shapes == 3
    obs, info = env.reset(seed=7, options={"count": 2})
    assert info == {"count": 2} and [p["type"] for p in obs.parts()] == ["text", "image", "text"]
    obs, done, step = env.step("<answer><image> 2</answer>")  # the placeholder stays text
    assert (done, step.metrics["format_valid"], obs.text, len(obs.images)) == (
        False,
        False,
        "No <answer>N</answer> found.\n",
        1,
    )
    assert env.oracle_response() == "<answer>2</answer>"


def test_vlm_envs_list_shows_its_docstring_aligned(shapes_dist: Path, tmp_path: Path) -> None:
    proc = _cli(shapes_dist, "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    (line,) = [x for x in lines if x.startswith("shapes ")]
    assert "Count the shapes in a picture: the worked example of docs/writing_an_env.md." in line
    assert line.endswith("[shapes-envs]")
    assert len({x.rindex("[") for x in lines}) == 1, proc.stdout  # the source column is aligned


@pytest.mark.parametrize(("policy", "least"), [("random", 0.0), ("oracle", 1.0)])
def test_vlm_envs_eval_plays_it(shapes_dist: Path, tmp_path: Path, policy: str, least: float) -> None:
    out = tmp_path / f"run-{policy}"
    proc = _cli(
        shapes_dist,
        "eval",
        "shapes",
        "--policy",
        policy,
        "-n",
        "6",
        "--out",
        str(out),
        "--quiet",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 6 and summary["success_rate"] >= least
    assert (out / "index.html").read_text().count("data:image/png;base64,") >= 6
