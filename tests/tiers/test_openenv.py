"""OpenEnv's own client against ``vlm-envs serve`` on loopback, installed as docs/serve.md says: ``openenv``
0.10.0 or ``openenv-core`` 0.3.0, whichever this venv holds. One reset and one step of the README's Sokoban
episode through ``GenericEnvClient``: the observation, reward and end are the in-process env's, and the
reply's metadata (status, metrics, episode reward; a reset's system prompt and tools) reaches the client
in the observation's ``metadata``, which every client keeps (0.3.0's ``StepResult`` has no ``metadata``;
0.10's has it too). Runs in the main venv and in the OpenEnv tiers (tests/tiers/run_tiers.py)."""

from __future__ import annotations

import importlib.metadata
from typing import Any

from openenv.core import GenericEnvClient
from readme_episode import CONFIG, SEED, WIN

from vlm_envs import build_env


def openenv_release() -> str:
    """The OpenEnv distribution this venv holds (both install the ``openenv`` package)."""
    for name in ("openenv", "openenv-core"):
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    raise AssertionError("openenv.core imports, but neither openenv nor openenv-core is installed")


def reply_metadata(result: Any) -> dict[str, Any]:
    """The reply's metadata as this client keeps it: in the observation, and (0.10) on the result too."""
    mirrored = result.observation["metadata"]
    if openenv_release().startswith("openenv-core"):
        assert not hasattr(result, "metadata")  # why the server mirrors it: 0.3.0 drops the reply's
    else:
        assert result.metadata == mirrored
    return mirrored


def test_generic_env_client_reads_a_step_and_its_metrics(server: str) -> None:
    local = build_env("sokoban", **CONFIG)
    obs, _ = local.reset(SEED)
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(env="sokoban", seed=SEED, config=CONFIG)
        assert result.observation["text"] == obs.text and not result.done
        meta = reply_metadata(result)
        assert (meta["status"], meta["episode_reward"]) == ("running", 0.0)
        assert meta["system_prompt"] == local.system_prompt() and meta["tools"] == local.tools()

        obs, done, info = local.step(WIN)
        result = client.step({"text": WIN})
    assert result.observation["text"] == obs.text
    assert (result.reward, result.done) == (info.reward, done) and done
    meta = reply_metadata(result)
    assert meta["metrics"] == info.metrics and meta["metrics"]["success"] is True
    assert meta["status"] == "terminated" and meta["episode_reward"] == local.episode_reward() == 1.0
    print(f"{openenv_release()}: reward {result.reward}, metrics {meta['metrics']}")
