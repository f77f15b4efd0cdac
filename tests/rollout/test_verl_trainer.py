"""verl's own V1 advantage step (``PPOTrainer._compute_advantage``) in our trainers: the rows' records reach
``vlm_envs_gigpo`` in the batch's order. TransferQueue's store is an in-memory stand-in (its real one starts
Ray actors); the rows go in as verl's V1 agent-loop worker puts them (``list_of_dict_to_tensordict``)."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("verl.trainer.ppo.v1", reason="verl is not installed (pip install 'vlm-envs[verl]')")

import torch
import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.utils.tensordict_utils import list_of_dict_to_tensordict
from verl_support import verl_config

from vlm_envs.rollout import verl_trainer
from vlm_envs.rollout.verl_gigpo import ADV_ESTIMATOR

R2 = math.sqrt(2.0)


class Store:
    """TransferQueue's ``kv_batch_get`` / ``kv_batch_put`` over a dict of per-key fields."""

    def __init__(self, rows: dict[str, dict[str, Any]]) -> None:
        self.rows = rows
        self.gets: list[list[str]] = []

    def get(self, keys: list[str], partition_id: str, select_fields: list[str]):
        self.gets.append(list(select_fields))
        picked = [{f: self.rows[k][f] for f in select_fields if f in self.rows[k]} for k in keys]
        return list_of_dict_to_tensordict(picked)

    def put(self, keys: list[str], partition_id: str, fields: Any, tags: Any = None) -> KVBatchMeta:
        names = list(fields.keys())  # a TensorDict iterates over its rows
        for i, key in enumerate(keys):
            self.rows[key].update({name: fields[name][i] for name in names})
        return KVBatchMeta(keys=keys, tags=tags or [{} for _ in keys], partition_id=partition_id)


def turn_row(uid: str, episode: str, turn: int, states: list[str], steps: list[float], n: int, score: float):
    """One windowed output as verl's V1 worker stores it: ``as_dict()`` fields plus the row's ``uid``."""
    record = {
        "episode_id": episode,
        "status": "completed",
        "turn": turn,
        "turns": [{"state_key": s} for s in states],
        "reward_breakdown": {"step_rewards": steps},
        "response_turns": [[turn, 0, n]],
    }
    scores = torch.zeros(n)
    scores[-1] = score
    return {
        "uid": uid,
        "response_mask": torch.ones(n, dtype=torch.int64),
        "rm_scores": scores,
        "extra_fields": {"vlm_envs": record, "turn_scores": steps},
    }


def trainer(estimator: str):
    trainer = object.__new__(verl_trainer.VlmEnvsTrainerSync)  # as verl's own CPU tests make workers
    trainer.config = verl_config(
        [
            f"algorithm.adv_estimator={estimator}",
            "+algorithm.vlm_envs_gigpo.gamma=0.5",
            "+algorithm.vlm_envs_gigpo.eps=1e-12",
        ]
    )
    return trainer


def test_verls_advantage_step_hands_each_rows_record_to_the_estimator(monkeypatch):
    """The hand-worked group of test_verl_gigpo (A: s0 -> s1 -> goal, B: s0 -> s2 -> stuck, gamma 0.5,
    std scale): A0 = sqrt(2), A1 = sqrt(2)/2, B0 = -sqrt(2), B1 = -sqrt(2)/2. Keys in a shuffled order."""
    rows = {
        "g_1_1": turn_row("g", "B", 1, ["s0", "s2"], [0.0, 0.0], 2, 0.0),
        "g_0_0": turn_row("g", "A", 0, ["s0", "s1"], [0.0, 1.0], 2, 1.0),
        "g_1_0": turn_row("g", "B", 0, ["s0", "s2"], [0.0, 0.0], 3, 0.0),
        "g_0_1": turn_row("g", "A", 1, ["s0", "s1"], [0.0, 1.0], 4, 1.0),
    }
    store = Store(rows)
    monkeypatch.setattr(tq, "kv_batch_get", store.get)
    monkeypatch.setattr(tq, "kv_batch_put", store.put)
    keys = list(rows)
    batch = KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id="train")
    assert trainer(ADV_ESTIMATOR)._compute_advantage(batch, metrics={}).keys == keys
    want = {"g_0_0": R2, "g_0_1": R2 / 2, "g_1_0": -R2, "g_1_1": -R2 / 2}
    for key, value in want.items():
        got = rows[key]["advantages"]
        assert got.tolist() == pytest.approx([value] * len(rows[key]["response_mask"]), abs=1e-5), key
    assert store.gets[0] == ["extra_fields"]


def test_with_another_estimator_it_is_verls_trainer(monkeypatch):
    rows = {
        "g_0_0": turn_row("g", "A", 0, ["s0"], [1.0], 2, 1.0),
        "g_1_0": turn_row("g", "B", 0, ["s0"], [0.0], 3, 0.0),  # rows of one length would not be nested
    }
    store = Store(rows)
    monkeypatch.setattr(tq, "kv_batch_get", store.get)
    monkeypatch.setattr(tq, "kv_batch_put", store.put)
    batch = KVBatchMeta(keys=list(rows), tags=[{}, {}], partition_id="train")
    trainer("grpo")._compute_advantage(batch, metrics={})
    assert all("extra_fields" not in fields for fields in store.gets)
    assert rows["g_0_0"]["advantages"].tolist() == pytest.approx([R2 / 2] * 2, abs=1e-5)  # verl's GRPO


def test_each_trainer_runs_as_verls_own_mode():
    """verl's trainer branches on its own mode names: ours set the config's mode before verl reads it."""
    seen = []

    class Base:
        def __init__(self, config: Any) -> None:
            seen.append(config.trainer.v1.trainer_mode)

    for name, mode in [("vlm_envs_sync", "sync"), ("vlm_envs_colocate_async", "colocate_async")]:
        config = verl_config([f"trainer.v1.trainer_mode={name}"])
        mixed = type("Mixed", (verl_trainer.HandsRecords, Base), {"mode": mode})
        mixed(config)
        assert seen[-1] == mode == config.trainer.v1.trainer_mode
    from verl.trainer.ppo.v1 import get_trainer_cls

    assert get_trainer_cls("vlm_envs_separate_async") is verl_trainer.VlmEnvsTrainerSeparateAsync
    assert get_trainer_cls("vlm_envs_sync").mode == "sync"
