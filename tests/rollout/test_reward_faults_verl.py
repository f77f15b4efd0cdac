"""Broken rewards never reach a gradient, verl's path: every registered env's reward-fault variants,
run by verl's own agent-loop worker, end FAILED with the reason in the record and reward 0.0 on a
self-consistent output (as every failed episode does)."""

from __future__ import annotations

import asyncio
import math

import pytest

pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

from omegaconf import OmegaConf
from reward_fault_helpers import REASONS, REPLY
from verl.experimental.agent_loop import agent_loop
from verl_support import (
    SAMPLING,
    TRAJECTORY,
    ScriptedServerManager,
    agent_loop_worker,
    assert_verl_contract,
    no_rollout_trace,
    verl_config,
)

from vlm_envs import list_envs
from vlm_envs.rollout import verl as loop_module
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.testing import ScriptedEngine, build_tiny_processor
from vlm_envs.testing.env_faults import fault_name, reward_faults

PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 256


def test_every_envs_broken_rewards_fail_through_verls_worker(monkeypatch) -> None:
    monkeypatch.setattr(agent_loop, "rollout_trace_attr", no_rollout_trace)
    entry = OmegaConf.create({"name": "vlm_envs", "_target_": loop_module.LOOP_TARGET})
    monkeypatch.setitem(agent_loop._agent_loop_registry, "vlm_envs", entry)
    config = verl_config(
        [f"data.max_prompt_length={PROMPT_LENGTH}", f"data.max_response_length={RESPONSE_LENGTH}"]
    )
    processor = build_tiny_processor("qwen2_vl")
    codec = ChatCodec(processor)
    envs = [spec.name for spec in list_envs()]
    with reward_faults(envs) as names:
        reply = [*codec.tokenize(REPLY), codec.end_of_turn_id]
        server = ScriptedServerManager(ScriptedEngine([reply] * len(names)))
        worker = agent_loop_worker(config, server, processor)

        async def all_of_them() -> list:
            return await asyncio.gather(
                *(
                    worker._run_agent_loop(
                        dict(SAMPLING),
                        TRAJECTORY,
                        trace=False,
                        agent_name="vlm_envs",
                        extra_info={"env": name, "seed": 3, "max_turns": 1},
                        raw_prompt=[],
                    )
                    for name in names
                )
            )

        outs = asyncio.run(all_of_them())
    for env in envs:
        for fault, reason in REASONS.items():
            out = outs[names.index(fault_name(env, fault))]
            record = out.extra_fields["vlm_envs"]
            assert record["status"] == "failed" and record["error"] == f"reward: {reason}", (env, fault)
            assert out.reward_score == 0.0 == record["reward"] and record["num_turns"] == 1
            assert all(math.isfinite(s) for s in out.extra_fields["turn_scores"])
            assert_verl_contract(out, codec, PROMPT_LENGTH)
