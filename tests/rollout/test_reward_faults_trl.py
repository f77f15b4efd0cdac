"""Broken rewards never reach a gradient, TRL's path: every registered env's reward-fault variants
played by the rollout function end FAILED with the reason and get a ``None`` reward (no advantage);
a GRPO step over an env whose reward is ``1e308`` beside a good one gives the broken group no
advantage and keeps every parameter finite."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("trl")

import datasets
import torch
import trl_helpers
from reward_fault_helpers import REASONS

from vlm_envs import list_envs
from vlm_envs.episode_carrier import EpisodeSpec, attach
from vlm_envs.rollout.record import RECORD_KEY
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer, episode_reward, rollout_func
from vlm_envs.testing.env_faults import fault_name, reward_faults


def test_every_envs_broken_rewards_fail_with_no_reward_through_the_rollout(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    # every episode reaches the env's step (where the step faults are): the rollout suppresses every image
    # special token, which would end an episode before it
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": 4})
    trainer = trl_helpers.trainer(
        trl_helpers.dataset("sokoban", 2, max_turns=1), args, cls=VlmEnvsGRPOTrainer
    )
    envs = [spec.name for spec in list_envs()]
    with reward_faults(envs) as names:
        prompts = [
            attach(
                [{"role": "user", "content": [{"type": "text", "text": "play"}]}],
                EpisodeSpec(n, 3, max_turns=1),
            )
            for n in names
        ]
        out = rollout_func(prompts, trainer)
    records = out[RECORD_KEY]
    assert all(record["num_turns"] == 1 for record in records), [r for r in records if r["num_turns"] != 1]
    assert episode_reward([None] * len(names), [None] * len(names), **{RECORD_KEY: records}) == [None] * len(
        names
    )
    for env in envs:
        for fault, reason in REASONS.items():
            record = records[names.index(fault_name(env, fault))]
            assert record["status"] == "failed" and record["error"] == f"reward: {reason}", (env, fault)
            assert record["num_turns"] == 1


def test_a_grpo_step_beside_a_huge_reward_keeps_every_parameter_finite(tmp_path: Path) -> None:
    """One prompt of Sokoban and one of its variant whose episode reward is 1e308 (TRL's
    ``scale_rewards="none"``, as in the issue): the broken group gets no advantage, the step trains."""
    torch.set_num_threads(1)
    with reward_faults(["sokoban"], ["huge"]):
        rows = trl_helpers.dataset("sokoban", 1, max_turns=1).to_list()
        rows += trl_helpers.dataset(fault_name("sokoban", "huge"), 1, max_turns=1).to_list()
        data = datasets.Dataset.from_list(rows).cast_column("images", datasets.Sequence(datasets.Image()))
        args = trl_helpers.config(tmp_path, max_steps=1, scale_rewards="none", shuffle_dataset=False)
        trainer = trl_helpers.trainer(data, args)
        trainer.train()
    (generation,) = trainer.generations
    rows = generation[trl_helpers.ROWS_KEY]
    broken = [i for i, row in enumerate(rows) if row.record["env"] != "sokoban"]
    assert len(broken) == 2 and all(rows[i].record["error"] == f"reward: {REASONS['huge']}" for i in broken)
    assert not generation["advantages"][broken].any()
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert all(math.isfinite(r["loss"]) for r in trainer.state.log_history if "loss" in r)
