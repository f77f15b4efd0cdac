"""ImageFidelityCheck: passes where every turn's image reaches the forward (the episode core that the
slime and verl hooks wrap, a Sample of our slime hook, verl's worker output of our agent loop,
VlmEnvsGRPOTrainer's training forwards), and
fails naming the turn on a pipeline that drops later images (TRL's stock rollout_func route); a
VlmEnvsGRPOTrainer run whose every episode fails the check stops with the check's reason."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
import trl_helpers
from trl import GRPOTrainer

from vlm_envs import build_env
from vlm_envs.fidelity import ImageFidelityCheck, ImageFidelityError
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trl import EpisodesFailedError, episode_reward, rollout_func
from vlm_envs.testing import ScriptedEngine, build_tiny_processor

TURNS = 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def probe_episode(processor: Any) -> Any:
    """An image_probe episode of TURNS turns, each with its image, played by the episode core."""
    codec = ChatCodec(processor)
    reply = [*codec.tokenize("<answer>A</answer>"), codec.end_of_turn_id]
    env = build_env("image_probe", questions=TURNS)
    config = EpisodeConfig(max_turns=TURNS, max_response_tokens=4000, max_new_tokens=64)
    return asyncio.run(run_episode(env, ScriptedEngine([reply]), codec, seed=1, config=config))


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_every_turns_image_passes_and_a_dropped_one_is_named(family: str) -> None:
    processor = build_tiny_processor(family)
    model = trl_helpers.MODELS[family](processor).eval()
    traj = probe_episode(processor)
    ids = torch.tensor([traj.tokens])
    inputs = {**traj.train_inputs(), "mm_token_type_ids": (ids == model.config.image_token_id).long()}
    check = ImageFidelityCheck(model, processor, raise_on_error=True, expect_image_each_turn=True)
    with torch.no_grad():
        model(input_ids=ids, **inputs)
    (report,) = check.reports
    assert report.images == TURNS and not report.problems
    # the images of turns 2 and 3 dropped, their pad tokens kept: named before the model's own error
    first = int(inputs["image_grid_thw"][0].prod())
    dropped = {
        **inputs,
        "pixel_values": inputs["pixel_values"][:first],
        "image_grid_thw": inputs["image_grid_thw"][:1],
    }
    with pytest.raises(ImageFidelityError, match=r"sample 0, turn 2: \d+ image pad tokens but no image left"):
        model(input_ids=ids, **dropped)
    # the later turns' image tokens dropped too (text only): only expect_image_each_turn sees it
    pads = ids == model.config.image_token_id
    keep = torch.ones_like(ids, dtype=torch.bool)
    keep[0, pads[0].nonzero()[first // 4 :, 0]] = False
    text_only = ids[keep].unsqueeze(0)
    report = check.check(text_only, None, dropped["pixel_values"], dropped["image_grid_thw"])
    assert report.problems == ["sample 0: turn(s) 2, 3 hold no image: later-turn images were dropped"]
    check.remove()
    with torch.no_grad(), pytest.raises(ValueError):  # the model's own error, once the hook is gone
        model(input_ids=ids, **dropped)


def test_slimes_hook_samples_pass(sglang_server: Any, tiny_engine: Any) -> None:
    """A Sample our slime hook hands slime's trainer, fed to the model as the trainer does."""
    from rollout_helpers import script, slime_args
    from row_helpers import oracle_replies
    from slime.utils.types import Sample

    from vlm_envs.rollout import slime as hook

    codec = ChatCodec(tiny_engine.processor)
    sample = Sample(index=0, metadata={"env": "image_probe", "seed": 1, "env_config": {"questions": TURNS}})
    script(sglang_server, codec, *oracle_replies("image_probe", 1, questions=TURNS))

    async def one() -> Any:
        try:
            return await hook.generate(
                slime_args(sglang_server, max_turns=TURNS), sample, {"max_new_tokens": 1024}
            )
        finally:
            await hook.close()

    out = asyncio.run(one())
    assert out.status is Sample.Status.COMPLETED and out.reward == 1.0, out.metadata["vlm_envs"]["error"]
    model = tiny_engine.model
    ids = torch.tensor([out.tokens])
    mm = {**out.multimodal_train_inputs, "mm_token_type_ids": (ids == model.config.image_token_id).long()}
    check = ImageFidelityCheck(model, tiny_engine.processor, raise_on_error=True, expect_image_each_turn=True)
    try:
        with torch.no_grad():
            model(input_ids=ids, **mm)
    finally:
        check.remove()
    assert [(r.images, r.problems) for r in check.reports] == [(TURNS, [])]


def test_verls_worker_output_passes(tmp_path: Path, monkeypatch: Any) -> None:
    """What verl's AgentLoopWorker made of our agent loop's episode (its ids, its processor's image
    tensors), fed to the model as verl's actor does, padding taken off."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from row_helpers import oracle_replies
    from sft_helpers import ReplyEngine
    from verl.experimental.agent_loop import agent_loop
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl_support import (
        SAMPLING,
        TRAJECTORY,
        ScriptedServerManager,
        agent_loop_worker,
        no_rollout_trace,
        verl_config,
    )

    from vlm_envs.cli import main

    monkeypatch.setattr(agent_loop, "rollout_trace_attr", no_rollout_trace)
    config = verl_config(["data.max_prompt_length=2048", "data.max_response_length=2048"])
    processor = build_tiny_processor("qwen2_vl")
    rows = tmp_path / "probe.parquet"
    options = ["--config", f"questions={TURNS}", "--max-turns", str(TURNS), "--trainer", "verl"]
    assert main(["make-dataset", "image_probe", "-n", "1", "--seed", "1", "--out", str(rows), *options]) == 0
    for entry in OmegaConf.load(rows.with_suffix(".agent_loop.yaml")):
        monkeypatch.setitem(agent_loop._agent_loop_registry, entry.name, entry)
    row = RLHFDataset(str(rows), processor.tokenizer, config.data, processor)[0]
    engine = ReplyEngine(ChatCodec(processor), oracle_replies("image_probe", 1, questions=TURNS))
    worker = agent_loop_worker(config, ScriptedServerManager(engine), processor)
    out = asyncio.run(worker._run_agent_loop(dict(SAMPLING), TRAJECTORY, trace=False, **row))
    assert out.extra_fields["vlm_envs"]["reward"] == 1.0
    prompt = out.prompt_ids[0][out.attention_mask[0, :2048].bool()]
    response = out.response_ids[0, : int(out.attention_mask[0, 2048:].sum())]
    ids = torch.cat([prompt, response]).unsqueeze(0)
    model = trl_helpers.MODELS["qwen2_vl"](processor).eval()
    inputs = {k: out.multi_modal_inputs[k] for k in ("pixel_values", "image_grid_thw")}
    check = ImageFidelityCheck(model, processor, raise_on_error=True, expect_image_each_turn=True)
    with torch.no_grad():
        model(input_ids=ids, mm_token_type_ids=(ids == model.config.image_token_id).long(), **inputs)
    assert [(r.images, r.problems) for r in check.reports] == [(TURNS, [])]


def test_vlm_envs_grpo_trainer_passes(tmp_path: Path) -> None:
    data = trl_helpers.dataset("image_probe", 2, max_turns=TURNS, questions=TURNS)
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": 4}, max_steps=2)
    trainer = trl_helpers.trainer(data, args, reward_funcs=[episode_reward])
    check = ImageFidelityCheck(trainer.model, trainer.processing_class, raise_on_error=True)
    trainer.train()
    training = [r for r in check.reports if r.samples > 1 and r.images]  # not generate()'s own forwards
    assert training and not check.problems
    assert not [r.skipped for r in check.reports if r.skipped]  # generate's prefills too were checked
    assert max(r.images / r.samples for r in training) >= 2  # later turns' images in the loss's forward


def test_stock_rollout_func_route_fails_naming_the_turn(tmp_path: Path) -> None:
    """Stock GRPOTrainer on the rollout_func route, with our rollout's refusal silenced (a trainer that
    claims to take the images and drops them): the check stops the first training forward."""
    data = trl_helpers.dataset("image_probe", 2, max_turns=TURNS, questions=TURNS)
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": 4}, max_steps=1)
    trainer = trl_helpers.trainer(
        data, args, cls=GRPOTrainer, reward_funcs=[episode_reward], rollout_func=rollout_func
    )
    trainer.take_episode_images = lambda rows: None  # what our rollout checks before handing images over
    ImageFidelityCheck(trainer.model, trainer.processing_class, raise_on_error=True)
    with pytest.raises(
        ImageFidelityError, match=r"sample \d+, turn 2: \d+ image pad tokens but no image left"
    ):
        trainer.train()


def test_a_run_whose_every_episode_fails_the_check_stops_naming_it(tmp_path: Path) -> None:
    """Clock shows its image on the first turn only: a check that expects one every turn fails each
    episode in its second turn's generate (the rollout marks it FAILED), and TRL's own train() stops
    at that round with the check's reason, where it used to finish its steps having trained on nothing."""
    never = sorted(ChatCodec(build_tiny_processor()).special_image_ids)  # each episode reaches turn 2
    args = trl_helpers.config(
        tmp_path, generation_kwargs={"max_new_tokens": 4, "suppress_tokens": never}, max_steps=2
    )
    trainer = trl_helpers.trainer(trl_helpers.dataset("clock", 2, max_turns=2), args)
    check = ImageFidelityCheck(
        trainer.model, trainer.processing_class, raise_on_error=True, expect_image_each_turn=True
    )
    reason = r"ImageFidelityError: image fidelity: sample \d+: turn\(s\) 2 hold no image"
    with pytest.raises(
        EpisodesFailedError, match=rf"every episode FAILED in 1 generation round.* 4x .*{reason}"
    ):
        trainer.train()
    assert trainer.state.global_step == 0 and not trainer.losses
    assert check.problems and all("turn(s) 2 hold no image" in p for p in check.problems)
