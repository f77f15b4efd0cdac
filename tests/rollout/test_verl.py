"""The verl agent loop against the real verl package on CPU: verl's dataset reads our parquet, verl's
own worker builds and runs our loop, verl's processor call reproduces our pixels, hostile replies
never reach the output, and every failure is a self-consistent output rather than an exception."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

pytest.importorskip(
    "verl.experimental.agent_loop.agent_loop",
    reason="verl is not installed (pip install 'vlm-envs[verl]'; verl requires transformers<5.11)",
)

import torch
from omegaconf import OmegaConf
from row_helpers import oracle_replies
from sft_helpers import ReplyEngine
from verl.experimental.agent_loop import agent_loop
from verl.experimental.agent_loop.agent_loop import DictConfigWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl_support import (
    SAMPLING,
    TRAJECTORY,
    RaisingServerManager,
    ScriptedServerManager,
    agent_loop_worker,
    assert_verl_contract,
    no_rollout_trace,
    verl_config,
)

from vlm_envs import build_env
from vlm_envs.datasets import verl as verl_dataset
from vlm_envs.datasets.build import make_dataset
from vlm_envs.rollout import verl as loop_module
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.testing import ScriptedEngine, build_tiny_processor

SOKOBAN = {"grid_size": [5, 5], "num_boxes": 1, "cell_size": 16}
SUPPORT = Path(__file__).parents[1] / "support"
PROMPT_LENGTH, RESPONSE_LENGTH, MAX_TURNS = 1024, 768, 4


@pytest.fixture(scope="module")
def config():
    return verl_config(
        [f"data.max_prompt_length={PROMPT_LENGTH}", f"data.max_response_length={RESPONSE_LENGTH}"]
    )


@pytest.fixture(scope="module")
def processors():
    return {family: build_tiny_processor(family) for family in ("qwen2_vl", "qwen3_vl")}


@pytest.fixture(autouse=True)
def untraced(monkeypatch):
    monkeypatch.setattr(agent_loop, "rollout_trace_attr", no_rollout_trace)


@pytest.fixture(scope="module")
def dataset_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl") / "train.parquet"
    return make_dataset("sokoban", 3, out, seed=5, max_turns=MAX_TURNS, env_config=SOKOBAN, trainer="verl")


def moves(codec: ChatCodec) -> list[list[int]]:
    """Scripted replies: legal moves that end their turn, then one that does not (a cut reply)."""
    replies = [f"<answer>{m}</answer>" for m in ("Up", "Left", "Down", "Right")]
    return [[*codec.tokenize(r), codec.end_of_turn_id] for r in replies] + [codec.tokenize("<answer>Up")]


def direct_episode(codec: ChatCodec, answers: list[list[int]], seed: int):
    """The same episode played by the episode core alone (what the slime hook plays)."""
    env = build_env("sokoban", args=SimpleNamespace(max_turns=MAX_TURNS), **SOKOBAN)
    episode = EpisodeConfig(
        max_turns=MAX_TURNS, max_response_tokens=RESPONSE_LENGTH, max_new_tokens=RESPONSE_LENGTH
    )
    traj = asyncio.run(run_episode(env, ScriptedEngine(answers), codec, seed=seed, config=episode))
    traj.train_inputs()
    return traj


def run_loop(config, processor, server, allowed_envs=None, **row: Any):
    """Our loop on ``row``; ``allowed_envs`` as the loop's entry in the agent-loop YAML gives it."""
    loop = loop_module.VlmEnvsAgentLoop(
        trainer_config=DictConfigWrap(config),
        server_manager=server,
        tokenizer=processor.tokenizer,
        processor=processor,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        allowed_envs=allowed_envs,
    )
    return asyncio.run(loop.run(dict(SAMPLING), **row))


def pad_runs(ids: list[int], pad: int) -> list[int]:
    runs, length = [], 0
    for t in [*ids, -1]:
        if t == pad:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def assert_consistent(out, codec: ChatCodec, config) -> None:
    """What verl relies on: a response to put the reward on, one image per pad run, the budgets; and
    the Sample contract on what verl's worker makes of the output (padding, its processor call)."""
    n = len(out.response_ids)
    assert n >= 1
    images = (out.multi_modal_data or {}).get("images") or []
    assert len(pad_runs([*out.prompt_ids, *out.response_ids], codec.image_token_id)) == len(images)
    assert len(out.prompt_ids) <= PROMPT_LENGTH and n <= RESPONSE_LENGTH
    out.as_dict()  # verl's V1 trainer path: puts the reward on the last response token
    worker = agent_loop_worker(config, RaisingServerManager(), codec.processor)
    padded = asyncio.run(worker._agent_loop_postprocess(out, False, raw_prompt=[]))
    assert_verl_contract(padded, codec, config.actor_rollout_ref.rollout.prompt_length)


def test_names_agree_with_the_dataset_writer():
    assert verl_dataset.AGENT_NAME == loop_module.AGENT_NAME
    assert verl_dataset.LOOP_TARGET == loop_module.LOOP_TARGET
    assert agent_loop._agent_loop_registry[loop_module.AGENT_NAME]["_target_"] == loop_module.LOOP_TARGET


def test_rlhf_dataset_reads_our_parquet(dataset_files, config, processors):
    processor = processors["qwen2_vl"]
    rows = RLHFDataset(str(dataset_files.parquet), processor.tokenizer, config.data, processor)
    assert len(rows) == 3
    row = rows[1]
    assert row["agent_name"] == "vlm_envs" and row["data_source"] == "sokoban"
    assert row["extra_info"]["env"] == "sokoban" and row["extra_info"]["seed"] == 6
    assert row["extra_info"]["max_turns"] == MAX_TURNS and row["index"] == 1
    obs, _ = build_env("sokoban", **SOKOBAN).reset(seed=6)
    parts = row["raw_prompt"][-1]["content"]
    images = [p["image"] for p in parts if p["type"] == "image"]
    assert len(images) == len(obs.images) == 1
    assert np.array_equal(np.asarray(images[0].convert("RGB")), np.asarray(obs.images[0].convert("RGB")))
    text = "".join(p["text"] for p in parts if p["type"] == "text")
    assert text == obs.text.replace("<image>", "")


def test_verl_worker_builds_and_runs_our_loop_from_the_yaml(dataset_files, config, processors, monkeypatch):
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    for entry in OmegaConf.load(dataset_files.yaml):  # as AgentLoopWorker.__init__ loads the YAML
        monkeypatch.setitem(agent_loop._agent_loop_registry, entry.name, entry)
    server = ScriptedServerManager(ScriptedEngine(moves(codec)))
    worker = agent_loop_worker(config, server, processor)
    row = RLHFDataset(str(dataset_files.parquet), processor.tokenizer, config.data, processor)[0]
    out = asyncio.run(worker._run_agent_loop(dict(SAMPLING), TRAJECTORY, trace=False, **row))

    traj = direct_episode(codec, moves(codec), seed=5)
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == traj.status.value and record["env"] == "sokoban" and record["error"] is None
    assert record["num_turns"] == len(traj.turns) >= 2
    assert out.reward_score == traj.reward and out.num_turns == len(traj.messages)
    prompt_mask = out.attention_mask[0, :PROMPT_LENGTH].bool()
    assert out.prompt_ids[0][prompt_mask].tolist() == traj.prompt_ids
    n = traj.response_length
    assert out.response_ids[0, :n].tolist() == traj.response_ids
    assert out.response_mask[0].tolist() == traj.loss_mask + [0] * (RESPONSE_LENGTH - n)
    assert out.response_logprobs[0, :n].tolist() == pytest.approx(traj.log_probs)
    inputs = traj.train_inputs()
    assert torch.equal(out.multi_modal_inputs["image_grid_thw"], inputs["image_grid_thw"])
    assert torch.equal(out.multi_modal_inputs["pixel_values"], inputs["pixel_values"])
    # every request: one episode id, log probs asked for, the resized images so far as PIL images
    assert len({r["request_id"] for r in server.requests}) == 1
    assert all(r["params"]["logprobs"] is True for r in server.requests)
    sent = server.requests[-1]["images"]
    assert [im.size for im in sent] == [p.image.size for p in traj.images[: len(sent)]]


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_verl_processor_call_reproduces_our_images(family, config, processors):
    processor = processors[family]
    codec = ChatCodec(processor)
    server = ScriptedServerManager(ScriptedEngine(moves(codec)))
    extra = {"env": "sokoban", "seed": 7, "env_config": SOKOBAN, "max_turns": MAX_TURNS}
    out = run_loop(config, processor, server, extra_info=extra, raw_prompt=[])
    traj = direct_episode(codec, moves(codec), seed=7)
    assert len(out.multi_modal_data["images"]) == len(traj.images) >= 3  # images in later turns too

    worker = agent_loop_worker(config, server, processor)
    input_ids = torch.tensor([[*out.prompt_ids, *out.response_ids]])
    inputs = worker._compute_multi_modal_inputs(out, input_ids)
    merge = processor.image_processor.merge_size
    counts = [math.prod(g) // merge**2 for g in inputs["image_grid_thw"].tolist()]
    assert counts == pad_runs(input_ids[0].tolist(), codec.image_token_id)
    ours = traj.train_inputs()
    assert torch.equal(inputs["image_grid_thw"], ours["image_grid_thw"])
    assert torch.equal(inputs["pixel_values"], ours["pixel_values"])


def test_out_of_vocabulary_reply_never_reaches_the_output(config, processors):
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    vocab = len(codec.tokenizer)
    hostile = [[*codec.tokenize("<answer>Up</answer>"), vocab + 7, codec.end_of_turn_id]]
    server = ScriptedServerManager(ScriptedEngine(hostile))
    extra = {"env": "sokoban", "seed": 1, "env_config": SOKOBAN}
    out = run_loop(config, processor, server, extra_info=extra, raw_prompt=[])
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "failed" and "verl server manager" in record["error"]
    assert str(vocab + 7) in record["error"]
    assert vocab + 7 not in out.response_ids and out.response_mask == [0]
    assert out.reward_score == 0.0
    assert_consistent(out, codec, config)


@pytest.mark.parametrize(
    ("server", "extra", "status", "error"),
    [
        ("no_log_probs", {"env": "sokoban"}, "failed", "log prob"),
        ("aborted", {"env": "sokoban"}, "aborted", "aborted"),
        ("raising", {"env": "sokoban"}, "failed", "went away"),
        ("scripted", {}, "failed", "no env for this row"),
        ("scripted", {"env": "no-such-env"}, "failed", "no-such-env"),
        ("scripted", {"env": "sokoban"}, "failed", "rollout.prompt_length=64"),
    ],
)
def test_every_failure_is_an_output_verl_can_take(server, extra, status, error, config, processors):
    if "prompt_length" in error:  # a prompt longer than verl's padded width cannot go into the batch
        config = verl_config(["data.max_prompt_length=64", f"data.max_response_length={RESPONSE_LENGTH}"])
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    engine = ScriptedEngine(moves(codec))
    managers = {
        "scripted": lambda: ScriptedServerManager(engine),
        "no_log_probs": lambda: _NoLogProbs(engine),
        "aborted": lambda: ScriptedServerManager(engine, stop_reason="aborted"),
        "raising": RaisingServerManager,
    }
    extra = {"seed": 2, "env_config": SOKOBAN, **extra}
    out = run_loop(config, processor, managers[server](), extra_info=extra, raw_prompt=[])
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == status and error in (record["error"] or ""), record
    assert_consistent(out, codec, config)
    # verl's worker takes it: padding, its processor call and positions
    worker = agent_loop_worker(config, managers[server](), processor)
    padded = asyncio.run(worker._agent_loop_postprocess(out, False, raw_prompt=[]))
    assert padded.input_ids.shape == (1, config.data.max_prompt_length + RESPONSE_LENGTH)


class _NoLogProbs(ScriptedServerManager):
    """A server that ignores ``logprobs`` (returns none)."""

    async def generate(self, request_id: str, **kwargs: Any):
        out = await super().generate(request_id, **kwargs)
        return out.model_copy(update={"log_probs": None})


def test_slime_shaped_env_plays_from_the_row_prompt(config, processors):
    """An env whose first observation is empty plays the row's own prompt (verl's raw_prompt)."""
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    server = ScriptedServerManager(ScriptedEngine(moves(codec)))
    raw_prompt = [{"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]}]
    path = str(SUPPORT / "slime_geo3k_env.py")
    extra = {"env": path}
    out = run_loop(config, processor, server, allowed_envs=[path], extra_info=extra, raw_prompt=raw_prompt)
    record = out.extra_fields["vlm_envs"]
    assert record["prompt_source"] == "sample", record
    assert "What is 2 + 2?" in codec.decode(out.prompt_ids)
    assert_consistent(out, codec, config)


def test_a_windowed_row_gives_one_output_per_turn_that_verl_reads(config, processors):
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    server = ScriptedServerManager(ScriptedEngine(moves(codec)))
    extra = {
        "env": "sokoban",
        "seed": 7,
        "env_config": SOKOBAN,
        "max_turns": MAX_TURNS,
        "history": "window:1",
    }
    outs = run_loop(config, processor, server, extra_info=extra, raw_prompt=[])
    assert isinstance(outs, list) and len(outs) == MAX_TURNS
    assert [o.extra_fields["vlm_envs"]["turn"] for o in outs] == list(range(MAX_TURNS))
    assert [r["prompt_ids"] for r in server.requests] == [o.prompt_ids for o in outs]  # what the engine saw
    worker = agent_loop_worker(config, server, processor)
    for out in outs:
        assert_consistent(out, codec, config)
        assert out.response_mask == [1] * len(out.response_ids)
        input_ids = torch.tensor([[*out.prompt_ids, *out.response_ids]])
        inputs = worker._compute_multi_modal_inputs(out, input_ids)
        counts = [math.prod(g) // 4 for g in inputs["image_grid_thw"].tolist()]
        assert counts == pad_runs(input_ids[0].tolist(), codec.image_token_id)
    assert [len(o.multi_modal_data["images"]) for o in outs] == [1, 2, 2, 2]


def run_from_the_yaml(config, processor, server, monkeypatch, loop_entry: dict[str, Any], **row: Any):
    """The row run by verl's own worker, our loop built from ``loop_entry`` (its agent-loop YAML entry)."""
    monkeypatch.setitem(agent_loop._agent_loop_registry, "vlm_envs", OmegaConf.create(loop_entry))
    worker = agent_loop_worker(config, server, processor)
    return asyncio.run(
        worker._run_agent_loop(dict(SAMPLING), TRAJECTORY, trace=False, agent_name="vlm_envs", **row)
    )


def test_a_row_names_a_module_path_only_where_the_agent_loop_yaml_lists_it(config, processors, monkeypatch):
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    path = str(SUPPORT / "slime_geo3k_env.py")
    raw_prompt = [{"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]}]
    entry = {"name": "vlm_envs", "_target_": loop_module.LOOP_TARGET}
    records = []
    for allowed in (None, [path]):
        loop_entry = entry if allowed is None else {**entry, "allowed_envs": allowed}
        server = ScriptedServerManager(ScriptedEngine(moves(codec)))
        out = run_from_the_yaml(
            config,
            processor,
            server,
            monkeypatch,
            loop_entry,
            extra_info={"env": path},
            raw_prompt=raw_prompt,
        )
        records.append(out.extra_fields["vlm_envs"])
        assert_verl_contract(out, codec, PROMPT_LENGTH)
    refused, played = records
    assert (
        refused["status"] == "failed" and "refused" in refused["error"] and "allowed_envs" in refused["error"]
    )
    assert played["status"] != "failed" and played["prompt_source"] == "sample", played


@pytest.mark.parametrize("env", ["builtins:print", "os:system", "MARKER"])
def test_a_row_never_chooses_code_to_run(env, config, processors, tmp_path, monkeypatch, capsys):
    """A downloaded row naming a callable or a module file: FAILED, saying why; nothing imported or called."""
    marker = tmp_path / "imported"
    module = tmp_path / "row_chosen_env.py"
    module.write_text(f"open({str(marker)!r}, 'w').close()\ndef build_env(**kw):\n    raise SystemExit\n")
    calls = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a))
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    extra = {"env": str(module) if env == "MARKER" else env, "seed": 1}
    out = run_loop(config, processor, ScriptedServerManager(ScriptedEngine(moves(codec))), extra_info=extra)
    record = out.extra_fields["vlm_envs"]
    assert (
        record["status"] == "failed" and "refused" in record["error"] and "registered env" in record["error"]
    )
    assert not marker.exists() and calls == [] and capsys.readouterr().out == ""
    assert_consistent(out, codec, config)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("seed", 3.7, "seed must be None or an int"),
        ("seed", True, "seed must be None or an int"),
        ("seed", -1, "seed must be an int in [0, 2**64)"),
        ("seed", "3", "seed must be None or an int"),
        ("max_turns", 0, "max_turns must be an int >= 1, got 0"),
        ("max_turns", True, "max_turns must be an int >= 1, got True"),
        ("max_turns", 2.0, "max_turns must be an int >= 1, got 2.0"),
        ("env_config", "grid_size=5", "env_config must be a mapping"),
        ("env", 7, "env must be a non-empty string"),
        ("gamma", float("nan"), "gamma must be a number in [0, 1], got nan"),
        ("gamma", float("inf"), "gamma must be a number in [0, 1], got inf"),
        ("gamma", -0.5, "gamma must be a number in [0, 1], got -0.5"),
        ("gamma", 1.5, "gamma must be a number in [0, 1], got 1.5"),
        ("shaping", "potential", "shaping must be one of none, distance, got 'potential'"),
        ("shaping", True, "shaping must be one of none, distance, got True"),
    ],
)
def test_a_row_is_never_coerced(field, value, error, config, processors):
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    extra = {"env": "sokoban", "seed": 2, "env_config": SOKOBAN, "history": "window:1", field: value}
    out = run_loop(config, processor, ScriptedServerManager(ScriptedEngine(moves(codec))), extra_info=extra)
    record = out.extra_fields["vlm_envs"]
    assert record["status"] == "failed" and error in record["error"], record["error"]
    assert_consistent(out, codec, config)


def test_a_rows_seed_and_turn_cap_are_honoured_exactly(config, processors):
    """A numpy seed plays that seed (the same episode as the int); max_turns 1 plays one turn."""
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    outs = []
    for seed in (np.int64(0), 0, 1):
        server = ScriptedServerManager(ScriptedEngine(moves(codec)))
        extra = {"env": "sokoban", "seed": seed, "env_config": SOKOBAN, "max_turns": 1}
        outs.append(run_loop(config, processor, server, extra_info=extra, raw_prompt=[]))
    for out in outs:
        record = out.extra_fields["vlm_envs"]
        assert record["status"] != "failed" and record["num_turns"] == 1, record
        assert_consistent(out, codec, config)
    first = [np.asarray(o.multi_modal_data["images"][0]) for o in outs]
    assert np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])


@pytest.mark.parametrize(
    ("gamma", "rewards"), [(0, [0.0, 0.0, 1.0]), (0.5, [0.25, 0.5, 1.0]), (None, [1.0] * 3)]
)
def test_a_windowed_row_discounts_with_its_gamma_zero_included(gamma, rewards, config, processors):
    """FogMaze seed 3 is won by the oracle in 3 turns with step rewards 0, 0, 1."""
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    server = ScriptedServerManager(ReplyEngine(codec, oracle_replies("fog_maze", 3)))
    extra = {"env": "fog_maze", "seed": 3, "history": "window:1", "turn_reward": "return", "gamma": gamma}
    outs = run_loop(config, processor, server, extra_info={k: v for k, v in extra.items() if v is not None})
    assert [o.extra_fields["vlm_envs"]["status"] for o in outs] == ["completed"] * 3
    assert [o.reward_score for o in outs] == rewards
    for out in outs:
        assert_consistent(out, codec, config)


@pytest.mark.parametrize(("shaping", "rewards"), [(None, [0.0, 0.0, 1.0]), ("distance", [2.0, 1.5, 2.0])])
def test_a_windowed_row_shapes_its_turn_rewards_with_the_distance(shaping, rewards, config, processors):
    """FogMaze seed 3: the oracle's 3 turns go 3 -> 2 -> 1 -> 0 turns from the goal, step rewards 0, 0, 1;
    with gamma 0.5 the terms are 0.5 * -2 + 3, 0.5 * -1 + 2 and 0 + 1 (the last turn ended the episode)."""
    processor = processors["qwen2_vl"]
    codec = ChatCodec(processor)
    server = ScriptedServerManager(ReplyEngine(codec, oracle_replies("fog_maze", 3)))
    extra = {"env": "fog_maze", "seed": 3, "history": "window:1", "turn_reward": "step", "gamma": 0.5}
    outs = run_loop(config, processor, server, extra_info={**extra, "shaping": shaping})
    assert [o.extra_fields["vlm_envs"]["distance_to_goal"] for o in outs] == [3, 2, 1]
    assert [o.reward_score for o in outs] == rewards
