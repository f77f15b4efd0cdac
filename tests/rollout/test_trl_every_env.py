"""Every registered env's ``make-dataset --trainer trl`` rows train through VlmEnvsGRPOTrainer: one
real GRPO step each, no episode failed, TRL's log probs and loss mask equal the rollout's."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("trl")

import torch
import trl_helpers

from vlm_envs import list_envs

MAX_TURNS = 2


@pytest.mark.parametrize("env", [spec.name for spec in list_envs()])
def test_every_env_trains_a_step_with_trl(env: str, tmp_path: Path) -> None:
    torch.set_num_threads(1)
    data = trl_helpers.dataset(env, 1, max_turns=MAX_TURNS)
    args = trl_helpers.config(tmp_path, per_device_train_batch_size=2, max_steps=1)
    trainer = trl_helpers.trainer(data, args)
    trainer.train()
    trl_helpers.check_losses(trainer, {0}, MAX_TURNS, learns=False)
