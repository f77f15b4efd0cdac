"""``vlm-envs make-dataset --trainer verl``: every printed override composes with verl's own Hydra
config (ppo_trainer for FSDP, ppo_megatron_trainer for Megatron) and lands where the run needs it."""

from __future__ import annotations

import shlex

import pytest

pytest.importorskip(
    "verl.trainer",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from verl_support import verl_config

from vlm_envs.cli import main


def printed_run(capsys) -> tuple[str, list[str]]:
    """The config name and the overrides of the launch command make-dataset printed."""
    out = capsys.readouterr().out
    command = out[out.index("python3 -m verl.trainer.main_ppo") :].replace("\\\n", " ")  # as a shell reads it
    words = shlex.split(command)
    assert words[:4] == ["python3", "-m", "verl.trainer.main_ppo", "--config-name"]
    return words[4], words[5:]


@pytest.mark.parametrize(
    ("backend", "config_name"), [(None, "ppo_trainer"), ("megatron", "ppo_megatron_trainer")]
)
def test_every_printed_override_composes_with_verls_config(tmp_path, capsys, backend, config_name):
    out = tmp_path / "sokoban.parquet"
    argv = ["make-dataset", "sokoban", "-n", "2", "--out", str(out), "--max-turns", "5", "--trainer", "verl"]
    assert main(argv + (["--backend", backend] if backend else [])) == 0
    name, overrides = printed_run(capsys)
    assert name == config_name
    cfg = verl_config(overrides, name=name)
    rollout = cfg.actor_rollout_ref.rollout
    assert cfg.data.train_files == str(out.resolve())
    assert rollout.agent.agent_loop_config_path == str(out.with_suffix(".agent_loop.yaml").resolve())
    assert rollout.agent.default_agent_loop == "vlm_envs" and rollout.multi_turn.max_assistant_turns == 5
    assert (rollout.prompt_length, rollout.response_length) == (
        cfg.data.max_prompt_length,
        cfg.data.max_response_length,
    )
    assert cfg.actor_rollout_ref.actor.strategy == ("megatron" if backend else "fsdp")
    assert cfg.data.image_key == "images" and cfg.algorithm.adv_estimator == "grpo"
    loops = OmegaConf.load(rollout.agent.agent_loop_config_path)
    assert [(e.name, e._target_) for e in loops] == [("vlm_envs", "vlm_envs.rollout.verl.VlmEnvsAgentLoop")]


def test_an_unknown_override_key_fails_composition():
    """The check above can fail: verl's config refuses a key it does not have."""
    with pytest.raises(ConfigCompositionException):
        verl_config(["actor_rollout_ref.rollout.agent.no_such_key=1"])


def test_backend_without_verl_is_a_usage_error(tmp_path, capsys):
    argv = [
        "make-dataset",
        "sokoban",
        "-n",
        "1",
        "--out",
        str(tmp_path / "x.parquet"),
        "--backend",
        "megatron",
    ]
    assert main(argv) == 2
    assert "--trainer verl" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
