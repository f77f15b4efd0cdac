"""ImageFidelityCheck: passes where every turn's image reaches the forward (the episode core that the
slime and verl hooks wrap, a Sample of our slime hook, VlmEnvsGRPOTrainer's training forwards), and
fails naming the turn on a pipeline that drops later images (TRL's stock rollout_func route)."""

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
from vlm_envs.rollout.trl import episode_reward, rollout_func
from vlm_envs.testing import ScriptedEngine, build_tiny_processor

TURNS = 3


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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


def test_vlm_envs_grpo_trainer_passes(tmp_path: Path) -> None:
    data = trl_helpers.dataset("image_probe", 2, max_turns=TURNS, questions=TURNS)
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": 4}, max_steps=2)
    trainer = trl_helpers.trainer(data, args, reward_funcs=[episode_reward])
    check = ImageFidelityCheck(trainer.model, trainer.processing_class, raise_on_error=True)
    trainer.train()
    training = [r for r in check.reports if r.samples > 1 and r.images]  # not generate()'s own forwards
    assert training and not check.problems
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
