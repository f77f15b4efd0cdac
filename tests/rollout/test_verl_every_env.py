"""Every registered env's ``vlm-envs make-dataset ENV --trainer verl`` rows, read by verl's own
``RLHFDataset`` and run by verl's own agent-loop worker from the written YAML, play a won episode
within the Sample contract (Geo3k's failed every episode: its env read a problem from the row)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

from omegaconf import OmegaConf
from row_helpers import oracle_replies
from sft_helpers import ReplyEngine
from standing_helpers import STANDING, oracle_standings
from verl.experimental.agent_loop import agent_loop
from verl.utils.dataset.rl_dataset import RLHFDataset
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
from vlm_envs.cli import main
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.testing import build_tiny_processor

SEED = 3
PROMPT_LENGTH, RESPONSE_LENGTH = 2048, 2048


@pytest.fixture(scope="module")
def config():
    return verl_config(
        [f"data.max_prompt_length={PROMPT_LENGTH}", f"data.max_response_length={RESPONSE_LENGTH}"]
    )


@pytest.fixture(scope="module")
def processor():
    return build_tiny_processor("qwen2_vl")


@pytest.mark.parametrize("env", [spec.name for spec in list_envs()])
def test_every_envs_verl_rows_win_through_verls_worker(env, tmp_path, config, processor, monkeypatch):
    monkeypatch.setattr(agent_loop, "rollout_trace_attr", no_rollout_trace)
    out = tmp_path / f"{env}.parquet"
    assert (
        main(["make-dataset", env, "-n", "1", "--seed", str(SEED), "--out", str(out), "--trainer", "verl"])
        == 0
    )
    for entry in OmegaConf.load(out.with_suffix(".agent_loop.yaml")):  # as AgentLoopWorker.__init__ does
        monkeypatch.setitem(agent_loop._agent_loop_registry, entry.name, entry)
    row = RLHFDataset(str(out), processor.tokenizer, config.data, processor)[0]
    codec = ChatCodec(processor)
    replies = oracle_replies(env, SEED)
    server = ScriptedServerManager(ReplyEngine(codec, replies))
    worker = agent_loop_worker(config, server, processor)

    out = asyncio.run(worker._run_agent_loop(dict(SAMPLING), TRAJECTORY, trace=False, **row))

    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "completed", record["error"]
    assert record["env"] == env and record["reward"] == 1.0 and record["num_turns"] == len(replies)
    assert out.reward_score == 1.0
    standings = [{k: t[k] for k in STANDING} for t in record["turns"]]
    assert standings == oracle_standings(env, SEED)  # where each turn stood, as the env says in process
    assert_verl_contract(out, codec, PROMPT_LENGTH)
