"""Broken rewards never reach a gradient: the one reward check at the episode core
(:mod:`vlm_envs.rewards`), and every registered env's reward-fault variants through the slime hook.
The verl and TRL paths have their own files (``test_reward_faults_verl.py``, ``..._trl.py``)."""

from __future__ import annotations

import asyncio
import fractions
import math

import numpy as np
import pytest
from reward_fault_helpers import REASONS, REPLY
from rollout_helpers import EVERY, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs import build_env, list_envs
from vlm_envs.eval.policies import OraclePolicy
from vlm_envs.rewards import MAX_ABS_REWARD, RewardError, call_reward, check_reward
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import Fault
from vlm_envs.testing.env_faults import REWARD_FAULTS, fault_name, reward_faults


def test_every_fault_has_its_reason() -> None:
    assert set(REASONS) == set(REWARD_FAULTS)


@pytest.mark.parametrize(
    "value", [0, 1, -1, 0.25, True, np.float32(0.5), np.int64(3), fractions.Fraction(1, 3), MAX_ABS_REWARD]
)
def test_finite_numbers_within_the_bound_pass(value) -> None:
    assert check_reward(value, "r") == float(value) and type(check_reward(value, "r")) is float


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (math.inf, "inf, not a finite"),
        (-math.inf, "-inf, not a finite"),
        (math.nan, "nan, not a finite"),
        (np.float64("nan"), "nan, not a finite"),
        (1e308, "beyond the accepted magnitude 1e\\+06"),
        (-2 * MAX_ABS_REWARD, "beyond"),
        (10**400, "beyond"),
        (None, "None, not a number"),
        ("1.0", "str '1.0', not a number"),
        (b"1", "bytes"),
        ([1.0], "list"),
        (1j, "complex"),
    ],
)
def test_anything_else_is_refused_with_the_value_named(value, reason) -> None:
    with pytest.raises(RewardError, match=f"^the reward is .*{reason}"):
        check_reward(value, "the reward")


def test_a_raising_reward_function_is_a_reward_error_naming_the_exception() -> None:
    def broken() -> float:
        raise KeyError("label")

    with pytest.raises(RewardError, match="the reward raised KeyError: 'label'"):
        call_reward(broken, "the reward")
    assert call_reward(lambda: 0.5, "the reward") == 0.5


def test_a_failure_reward_must_pass_the_check_too() -> None:
    with pytest.raises(RewardError, match="failure_reward is nan"):
        EpisodeConfig(failure_reward=math.nan)


class OneReply:
    """An engine that answers every turn with :data:`REPLY`."""

    def __init__(self, codec) -> None:
        self.ids = [*codec.tokenize(REPLY), codec.end_of_turn_id]

    async def generate(self, input_ids, images, params) -> EngineOutput:
        return EngineOutput(token_ids=self.ids, log_probs=[-0.5] * len(self.ids), finish_reason="stop")


def test_the_core_ends_a_broken_reward_failed_and_keeps_a_good_one(served) -> None:
    """A fault's episode FAILS with the reason and the failure reward, no record holding the broken
    value; the same env unbroken ends as before with its own reward."""
    _, codec = served
    config = EpisodeConfig(max_turns=1, failure_reward=-0.5)
    with reward_faults(["sokoban"]) as names:
        for name in names:
            traj = asyncio.run(run_episode(build_env(name), OneReply(codec), codec, seed=3, config=config))
            fault = name.partition("-reward-")[2]
            assert traj.status is Status.FAILED and traj.error == f"reward: {REASONS[fault]}"
            assert traj.reward == -0.5 and all(math.isfinite(t.reward) for t in traj.turns)
    good = asyncio.run(run_episode(build_env("sokoban"), OneReply(codec), codec, seed=3, config=config))
    assert good.status is Status.TRUNCATED and good.error is None and good.reward == 0.0


@pytest.fixture
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def test_every_envs_broken_rewards_fail_through_the_slime_hook(served, fresh_state) -> None:
    """slime's Samples of every env's fault variants: FAILED, the reason in the record, reward 0.0
    (finite), the response still self-consistent."""
    server, codec = served
    server.inject(Fault("tokens", token_ids=tuple([*codec.tokenize(REPLY), codec.end_of_turn_id])), EVERY)
    envs = [spec.name for spec in list_envs()]
    with reward_faults(envs) as names:
        samples = [Sample(index=i, metadata={"env": name, "seed": 3}) for i, name in enumerate(names)]
        args = slime_args(server, max_turns=1)  # the YAML's max_turns: 1

        async def all_of_them() -> list[Sample]:
            try:
                params = {"temperature": 1.0, "max_new_tokens": 32}
                return await asyncio.gather(*(hook.generate(args, s, dict(params)) for s in samples))
            finally:
                await hook.close()

        out = asyncio.run(all_of_them())
    assert len(out) == len(envs) * len(REWARD_FAULTS)
    for env in envs:
        for fault, reason in REASONS.items():
            sample = out[names.index(fault_name(env, fault))]
            record = sample.metadata["vlm_envs"]
            assert sample.status is Sample.Status.FAILED, (env, fault, record["error"])
            assert record["error"] == f"reward: {reason}" and record["status"] == "failed"
            assert sample.reward == 0.0 == record["reward"] and record["num_turns"] == 1
            assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length
            assert asyncio.run(hook.reward(args, sample)) == 0.0


def test_eval_makes_the_same_check() -> None:
    """``vlm-envs eval``'s own loop: a broken episode reward is a failed episode with the reason."""
    with reward_faults(["sokoban"], ["none", "raises"]) as names:
        results = [asyncio.run(OraclePolicy().play(build_env(name), 3, 20)) for name in names]
    for result, fault in zip(results, ["none", "raises"], strict=True):
        assert result.status == "failed" and result.error == f"reward: {REASONS[fault]}"
        assert result.reward == 0.0 and len(result.turns) > 1  # the oracle played the level out
