"""The core install (``pip install .``, no extra): every bundled env registered by the installed
distribution's entry points, the README's first episode through ``gymnasium.make``, and the same
episode in a process that cannot import torch (the core needs none). Runs in the main venv and in
the ``core`` tier (tests/tiers/run_tiers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import tomllib
from readme_episode import CONFIG, SEED, WIN

from vlm_envs import build_env, list_envs

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

GUARDED_EPISODE = f"""
import importlib.abc, json, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "transformers", "tokenizers"):
            raise ImportError(name + " is not part of the core install")
        return None

sys.meta_path.insert(0, Refuse())
import gymnasium
import vlm_envs

env = gymnasium.make("vlm_envs/Sokoban-v0", grid_size={CONFIG["grid_size"]!r}, num_boxes=1)
obs, info = env.reset(seed={SEED})
obs, reward, terminated, truncated, info = env.step({WIN!r})
print(json.dumps({{"reward": reward, "terminated": terminated, "success": info["metrics"]["success"]}}))
"""


def test_every_bundled_env_is_registered_by_the_installed_distribution() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["vlm_envs.envs"]
    assert {spec.name for spec in list_envs()} >= set(declared)
    assert all(spec.gym_id in gymnasium.registry for spec in list_envs() if spec.name in declared)


def test_gymnasium_make_plays_the_readme_episode() -> None:
    env = gymnasium.make("vlm_envs/Sokoban-v0", **CONFIG)
    obs, _ = env.reset(seed=SEED)
    local = build_env("sokoban", **CONFIG)
    first, _ = local.reset(seed=SEED)
    assert obs["text"] == first.text and obs["role"] == "user"
    (image,) = obs["images"]
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert np.array_equal(image, np.asarray(first.images[0].convert("RGB")))
    obs, reward, terminated, truncated, info = env.step(WIN)
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["metrics"]["success"] and info["metrics"]["action_valid"]
    assert "Solved" in obs["text"] and len(obs["images"]) == 1
    env.close()


def test_the_core_plays_without_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-c", GUARDED_EPISODE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"reward": 1.0, "terminated": True, "success": True}
