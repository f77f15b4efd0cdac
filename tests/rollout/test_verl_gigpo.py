"""The ``vlm_envs_gigpo`` advantage estimator through verl's own registry and ``compute_advantage``, on
hand-built batches whose answers are worked out by hand (windowed and full-history rows), and on
hostile records, which never fail the step."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import tomllib

pytest.importorskip(
    "verl.trainer.ppo.core_algos",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl_support import verl_config

from vlm_envs.rollout import verl_gigpo
from vlm_envs.rollout.verl_gigpo import ADV_ESTIMATOR, GiGPOSettings, records_for_rows

ROOT = Path(__file__).parents[2]
R2 = math.sqrt(2.0)
#: Settings of the hand-worked batches: gamma 0.5, plain centring (then Bessel's std where asked).
MEAN = {"vlm_envs_gigpo": {"gamma": 0.5, "scale": "mean"}}
STD = {"vlm_envs_gigpo": {"gamma": 0.5, "eps": 1e-12}}


def record(episode: str, states: list[str | None], steps: list[float], spans: list[list[int]], **extra):
    """What VlmEnvsAgentLoop writes in ``extra_fields["vlm_envs"]`` (the keys the estimator reads)."""
    return {
        "episode_id": episode,
        "status": "completed",
        "turns": [{"state_key": key} for key in states],
        "reward_breakdown": {"step_rewards": steps},
        "response_turns": spans,
        **extra,
    }


def rows(masks: list[list[int]], finals: list[float]):
    """``response_mask`` and ``token_level_rewards`` (each row's score on its last generated token)."""
    mask = torch.tensor(masks, dtype=torch.int64)
    rewards = torch.zeros(mask.shape, dtype=torch.float32)
    for i, score in enumerate(finals):
        rewards[i, int(mask[i].nonzero().max())] = score
    return rewards, mask


# Two episodes of group "g": A went s0 -> s1 -> goal (step rewards [0, 1], return 1), B went s0 -> s2 ->
# stuck ([0, 0], return 0). gamma = 0.5, so the returns from each turn are A [0.5, 1], B [0, 0].
#   episode level (mean): A 1 - 0.5 = +0.5, B -0.5
#   anchor s0: A's 0.5 and B's 0, mean 0.25: A +0.25, B -0.25; s1 and s2 were each seen once: 0
#   so A0 = 0.5 + 0.25 = 0.75, A1 = 0.5, B0 = -0.75, B1 = -0.5.
# With Bessel's std: episode level +-0.5 / sqrt(0.5) = +-sqrt(2) / 2; anchor s0 +-0.25 / sqrt(0.125) =
# +-sqrt(2) / 2: A0 = sqrt(2), A1 = sqrt(2) / 2, B0 = -sqrt(2), B1 = -sqrt(2) / 2.
EXPECTED = {"mean": (0.75, 0.5, -0.75, -0.5), "std": (R2, R2 / 2, -R2, -R2 / 2)}


def windowed_batch():
    """One row per turn (window:K): A0, A1, B0, B1, each reply of 2 or 3 tokens, padded to 4. verl's V1
    trainer gives every turn of an episode its last turn's reward."""
    a, b = [1.0] * 2, [0.0, 0.0]
    records = [
        record("A", ["s0", "s1"], [0.0, 1.0], [[0, 0, 2]], turn=0),
        record("A", ["s0", "s1"], [0.0, 1.0], [[1, 0, 3]], turn=1),
        record("B", ["s0", "s2"], [0.0, 0.0], [[0, 0, 2]], turn=0),
        record("B", ["s0", "s2"], [0.0, 0.0], [[1, 0, 2]], turn=1),
    ]
    rewards, mask = rows([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 0, 0]], [*a, *b])
    return rewards, mask, np.array(["g"] * 4, dtype=object), records


def full_batch():
    """One row per episode: reply 0 at tokens 0:2, an observation at 2:4, reply 1 at 4:6, padding after."""
    records = [
        record("A", ["s0", "s1"], [0.0, 1.0], [[0, 0, 2], [1, 4, 6]]),
        record("B", ["s0", "s2"], [0.0, 0.0], [[0, 0, 2], [1, 4, 6]]),
    ]
    rewards, mask = rows([[1, 1, 0, 0, 1, 1, 0, 0]] * 2, [1.0, 0.0])
    return rewards, mask, np.array(["g", "g"], dtype=object), records


@pytest.mark.parametrize("scale", ["mean", "std"])
def test_windowed_rows_get_their_turns_advantage_through_verls_registry(scale):
    rewards, mask, index, records = windowed_batch()
    a0, a1, b0, b1 = EXPECTED[scale]
    estimator = core_algos.get_adv_estimator_fn(ADV_ESTIMATOR)
    config = OmegaConf.create(MEAN if scale == "mean" else STD)
    with records_for_rows(records):
        advantages, returns = estimator(
            token_level_rewards=rewards, response_mask=mask, index=index, config=config
        )
    want = torch.tensor([[a0, a0, 0, 0], [a1, a1, a1, 0], [b0, b0, 0, 0], [b1, b1, 0, 0]])
    assert torch.allclose(advantages, want, atol=1e-6) and torch.equal(returns, advantages)


@pytest.mark.parametrize("scale", ["mean", "std"])
def test_a_full_history_row_gives_each_turns_tokens_that_turns_advantage(scale):
    rewards, mask, index, records = full_batch()
    a0, a1, b0, b1 = EXPECTED[scale]
    config = OmegaConf.create(MEAN if scale == "mean" else STD)
    estimator = core_algos.get_adv_estimator_fn(ADV_ESTIMATOR)
    nontensor = {"vlm_envs": np.array(records, dtype=object)}  # as a caller that passes the batch's fields
    advantages, _ = estimator(
        token_level_rewards=rewards,
        response_mask=mask,
        index=index,
        config=config,
        non_tensor_batch=nontensor,
    )
    want = torch.tensor([[a0, a0, 0, 0, a1, a1, 0, 0], [b0, b0, 0, 0, b1, b1, 0, 0]])
    assert torch.allclose(advantages, want, atol=1e-6)


def test_verls_compute_advantage_runs_the_estimator_on_a_dataproto():
    """verl's own ``compute_advantage`` (ray_trainer) on CPU; the config is verl's Hydra config with ours."""
    rewards, mask, index, records = windowed_batch()
    config = verl_config(
        [
            f"algorithm.adv_estimator={ADV_ESTIMATOR}",
            "+algorithm.vlm_envs_gigpo.gamma=0.5",
            "+algorithm.vlm_envs_gigpo.scale=mean",
        ]
    )
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask},
        non_tensors={"uid": index, "vlm_envs": np.array(records, dtype=object)},
    )
    with records_for_rows(list(data.non_tensor_batch["vlm_envs"])):
        out = compute_advantage(data, adv_estimator=config.algorithm.adv_estimator, config=config.algorithm)
    a0, a1, b0, b1 = EXPECTED["mean"]
    want = torch.tensor([[a0, a0, 0, 0], [a1, a1, a1, 0], [b0, b0, 0, 0], [b1, b1, 0, 0]])
    assert torch.allclose(out.batch["advantages"], want) and torch.equal(out.batch["returns"], want)


def test_prompt_groups_stay_apart():
    """Episode C of another prompt also started in "s0": it joins neither g's episodes nor g's anchor, and
    a group of one episode gets 0."""
    rewards, mask, index, records = windowed_batch()
    c = record("C", ["s0"], [1.0], [[0, 0, 2]], turn=0)
    more, more_mask = rows([[1, 1, 0, 0]], [1.0])
    index = np.array([*index, "h"], dtype=object)
    with records_for_rows([*records, c]):
        advantages, _ = verl_gigpo.compute_gigpo_advantage(
            torch.cat([rewards, more]), torch.cat([mask, more_mask]), index, OmegaConf.create(MEAN)
        )
    assert advantages[:4, 0].tolist() == pytest.approx([0.75, 0.5, -0.75, -0.5])
    assert advantages[4].tolist() == [0.0] * 4


def test_without_records_it_is_verls_grpo_over_the_rows():
    rewards, mask = rows([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]], [1.0, 0.0, 0.5, 2.0])
    index = np.array(["p", "p", "q", "q"], dtype=object)
    ours, _ = verl_gigpo.compute_gigpo_advantage(rewards, mask, index, OmegaConf.create({}))
    grpo, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index, epsilon=1e-6)
    assert torch.allclose(ours, grpo, atol=1e-6)
    # records that do not number the rows are not guessed at: the same GRPO, with a warning
    with records_for_rows([None]):
        again, _ = verl_gigpo.compute_gigpo_advantage(rewards, mask, index, OmegaConf.create({}))
    assert torch.equal(again, ours)


HOSTILE = [
    None,
    "a string",
    {"episode_id": 7},
    record("X", ["s0"], [0.0], [[0, 0, 9]]),  # a span past the response
    record("X", ["s0"], [0.0], [[0, 1, 2]]),  # leaves a generated token out: not this row's record
    record("X", ["s0"], [0.0], [[3, 0, 2]]),  # a turn the episode does not have
    record("X", ["s0"], [0.0], [["0", 0, 2]]),
    record("X", ["s0"], [0.0], "spans"),
    record("X", [["not", "a", "key"]], [0.0], [[0, 0, 2]]),
    record("X", ["s0"], [float("nan")], [[0, 0, 2]]),
    record("X", ["s0"], [0.0], [[0, 0, 2]], status="failed"),
    {**record("X", ["s0"], [0.0], [[0, 0, 2]]), "turns": None, "reward_breakdown": 3},
]


@pytest.mark.parametrize("bad", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_record_gets_the_episode_level_advantage_and_never_fails_the_step(bad):
    """Good episode G (return 1, from "s0") and a row whose record is unusable (return 0): the bad row is
    an episode of its own without anchor states, so both get +-0.5 (mean), G's turn no step term."""
    rewards, mask = rows([[1, 1, 0, 0], [1, 1, 0, 0]], [1.0, 0.0])
    good = record("G", ["s0"], [1.0], [[0, 0, 2]])
    with records_for_rows([good, bad]):
        advantages, _ = verl_gigpo.compute_gigpo_advantage(
            rewards, mask, np.array(["g", "g"], dtype=object), OmegaConf.create(MEAN)
        )
    assert advantages.tolist() == [[0.5, 0.5, 0.0, 0.0], [-0.5, -0.5, 0.0, 0.0]]


def test_a_reward_that_is_not_a_number_counts_as_0():
    rewards, mask = rows([[1, 1, 0, 0], [1, 1, 0, 0]], [1.0, 0.0])
    rewards[1, 0] = float("nan")
    good, other = record("G", ["s0"], [1.0], [[0, 0, 2]]), record("H", ["s0"], [0.0], [[0, 0, 2]])
    with records_for_rows([good, other]):
        advantages, _ = verl_gigpo.compute_gigpo_advantage(
            rewards, mask, np.array(["g", "g"], dtype=object), OmegaConf.create(MEAN)
        )
    # episode level +-0.5; anchor s0: step returns 1 and 0, +-0.5
    assert advantages.tolist() == [[1.0, 1.0, 0.0, 0.0], [-1.0, -1.0, 0.0, 0.0]]


def test_settings_come_from_the_algorithm_config_and_bad_ones_raise():
    assert GiGPOSettings.of(None) == GiGPOSettings(step_weight=1.0, gamma=0.95, scale="std", eps=1e-6)
    config = verl_config(
        ["algorithm.norm_adv_by_std_in_grpo=False", "+algorithm.vlm_envs_gigpo.step_weight=2"]
    )
    assert GiGPOSettings.of(config.algorithm) == GiGPOSettings(step_weight=2.0, scale="mean")
    for bad, match in [
        ({"gamma": 1.5}, "gamma"),
        ({"gamma": "0.9"}, "gamma"),
        ({"step_weight": float("inf")}, "step_weight"),
        ({"step_weight": -1.0}, "step_weight"),
        ({"eps": 0.0}, "eps"),
        ({"scale": "max"}, "scale"),
        ({"weight": 1.0}, "unknown"),
    ]:
        with pytest.raises(ValueError, match=match):
            GiGPOSettings.of({"vlm_envs_gigpo": bad})


def test_verl_imports_the_estimator_through_the_entry_point_this_package_declares(tmp_path):
    """verl's own plugin loader (verl/__init__.py: the ``verl.plugins`` entry points) registers the
    estimator in a fresh interpreter: the entry point as pyproject declares it, in a stand-in
    distribution (the installed one may predate it)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["verl.plugins"]
    assert declared == {
        "vlm_envs_gigpo": "vlm_envs.rollout.verl_gigpo",
        "vlm_envs_trainer": "vlm_envs.rollout.verl_trainer",  # skipped by verl without transfer_queue
    }
    dist = tmp_path / "vlm_envs_plugin_check-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vlm-envs-plugin-check\nVersion: 0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in declared.items())
    (dist / "entry_points.txt").write_text(f"[verl.plugins]\n{lines}")
    script = textwrap.dedent(
        """
        import verl  # loads the verl.plugins entry points
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
        print(get_adv_estimator_fn("vlm_envs_gigpo").__module__)
        """
    )
    env_path = [str(tmp_path), str(ROOT / "src"), *sys.path]
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(p for p in env_path if p),
            "VERL_USE_EXTERNAL_PLUGINS": "auto",
        },
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "vlm_envs.rollout.verl_gigpo"
