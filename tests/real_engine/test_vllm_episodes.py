"""``run_episode`` against a real vLLM: token-exact trajectories, the model's own log probs, images
that matter, and the SGLang stand-in shown to answer as the real engine does.

vLLM serves the tiny Qwen2-VL of ``conftest.py`` (fp32); transformers loads the same folder here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image
from rollout_helpers import assert_trainer_invariants
from transformers import Qwen2VLForConditionalGeneration

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.engines.hf_model import model_inputs
from vlm_envs.rollout.engines.image_uris import image_data_uri
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.processors import load_processor
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.testing import SGLangTestServer, TinyEngine

pytestmark = pytest.mark.timeout(1800)  # the first test waits for the venv build and vLLM's startup

SOKOBAN = {"grid_size": (6, 6), "num_boxes": 1, "render_mode": "vision"}
GREEDY = {"temperature": 0.0}
#: fp32 engine vs trainer log probs differ by ~1e-6 at most; a misalignment by 1e-2 and more (FACTS.md).
LOG_PROB_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def codec(model_dir: Path) -> ChatCodec:
    return ChatCodec(load_processor(str(model_dir)))


@pytest.fixture(scope="module")
def model(model_dir: Path) -> torch.nn.Module:
    return Qwen2VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).eval()


def play(
    engine: Engine,
    codec: ChatCodec,
    env_name: str,
    seed: int,
    sampling: Mapping[str, Any] = GREEDY,
    max_new_tokens: int = 16,
    **config: Any,
) -> Trajectory:
    """One episode of three turns at most, checked against the chat template's rendering."""
    env = build_env(env_name, **config)
    episode = EpisodeConfig(max_turns=3, max_new_tokens=max_new_tokens, check_template=True)

    async def main() -> Trajectory:
        try:
            return await run_episode(env, engine, codec, seed=seed, config=episode, sampling_params=sampling)
        finally:
            await engine.close()  # type: ignore[attr-defined]

    return asyncio.run(main())


def trainer_log_probs(model: torch.nn.Module, traj: Trajectory, codec: ChatCodec) -> list[float]:
    """What a trainer's fp32 forward pass over the whole trajectory gives each generated token."""
    inputs = model_inputs(traj.tokens, traj.train_inputs(), codec.image_token_id)
    with torch.no_grad():
        logits = model(**inputs).logits[0].float()
    log_probs = torch.log_softmax(logits, dim=-1)
    start = len(traj.tokens) - len(traj.loss_mask)
    return [
        float(log_probs[start + i - 1, traj.tokens[start + i]]) for i, m in enumerate(traj.loss_mask) if m
    ]


def check_exact(traj: Trajectory, codec: ChatCodec, model: torch.nn.Module, from_turn: int = 0) -> None:
    """Token-exact, the Sample contract, and the engine's log probs of turns ``from_turn`` on equal to
    the trainer's."""
    assert traj.status in (Status.COMPLETED, Status.TRUNCATED), traj.error
    assert traj.template_check is not None and traj.template_check.ok, traj.template_check
    assert_trainer_invariants(traj, codec)
    skip = sum(t.generated_tokens for t in traj.turns[:from_turn])
    engine = [lp for lp, m in zip(traj.log_probs, traj.loss_mask, strict=True) if m][skip:]
    trainer = trainer_log_probs(model, traj, codec)[skip:]
    assert len(engine) == len(trainer) > 0
    worst = max(abs(a - b) for a, b in zip(engine, trainer, strict=True))
    assert worst < LOG_PROB_TOLERANCE, f"engine and trainer log probs differ by up to {worst:.2e}"


def test_sokoban_with_an_image_every_turn_is_token_exact(
    vllm_url: str, codec: ChatCodec, model: torch.nn.Module
) -> None:
    traj = play(VLLMEngine(vllm_url, image_token_id=codec.image_token_id), codec, "sokoban", 0, **SOKOBAN)
    assert len(traj.turns) == 3 and len(traj.images) == 3  # the first observation and two more
    check_exact(traj, codec, model)


class FirstReplyChosen(VLLMEngine):
    """Makes the model's first reply ``choice`` (vLLM's structured outputs); later turns are its own."""

    def __init__(self, url: str, image_token_id: int | None, choice: str) -> None:
        super().__init__(url, image_token_id=image_token_id)
        self.choice: str | None = choice

    async def generate(self, input_ids: Any, images: Any, sampling_params: Mapping[str, Any]) -> Any:
        if self.choice is not None:
            sampling_params = {**sampling_params, "structured_outputs": {"choice": [self.choice]}}
            self.choice = None
        return await super().generate(input_ids, images, sampling_params)


def test_geo3k_tool_turn_is_token_exact(vllm_url: str, codec: ChatCodec, model: torch.nn.Module) -> None:
    """A random model never writes a tool call, so its first reply is the oracle's calc_score call
    (vLLM's structured outputs). vLLM reports the log probs of that turn after its grammar mask
    (about 0), so the comparison with the trainer starts at the turn after the tool's reply, whose
    tokens the model wrote freely: a misplaced tool observation would show there."""
    env = build_env("geo3k")
    env.reset(seed=0)
    reply = env.oracle_response()
    assert reply is not None and "<tool_call>" in reply
    engine = FirstReplyChosen(vllm_url, codec.image_token_id, reply)
    traj = play(engine, codec, "geo3k", 0, max_new_tokens=64)
    assert traj.turns[0].metrics.get("tool_calls") == 1
    assert traj.turns[0].observation.role == "tool" and len(traj.turns) >= 2
    check_exact(traj, codec, model, from_turn=1)


def noise(seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (112, 112, 3), dtype=np.uint8))


def test_the_image_decides_the_greedy_reply(vllm_url: str, codec: ChatCodec) -> None:
    """The same picture twice gives the same reply; another picture another one (vLLM read the pixels)."""

    async def reply(image: Image.Image) -> tuple[list[int], list[float]]:
        message = {
            "role": "user",
            "content": [{"type": "image", "image": image}, {"type": "text", "text": "?"}],
        }
        prompt = codec.encode_prompt([message])
        engine = VLLMEngine(vllm_url, image_token_id=codec.image_token_id)
        async with engine:
            uris = [image_data_uri(p.image) for p in prompt.images]
            out = await engine.generate(prompt.ids, uris, {**GREEDY, "max_new_tokens": 16})
        return out.token_ids, out.log_probs

    first, again, other = (asyncio.run(reply(noise(seed))) for seed in (0, 0, 1))
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]


def test_the_sglang_stand_in_answers_as_vllm_does(
    vllm_url: str, codec: ChatCodec, model: torch.nn.Module
) -> None:
    """The same weights behind the stand-in of SGLang's /generate give the same greedy episode."""
    real = play(VLLMEngine(vllm_url, image_token_id=codec.image_token_id), codec, "sokoban", 2, **SOKOBAN)
    with SGLangTestServer(TinyEngine(model, codec.processor)) as server:
        stand_in = play(SGLangEngine(server.url), codec, "sokoban", 2, **SOKOBAN)
    assert stand_in.tokens == real.tokens
    assert [t.model_text for t in stand_in.turns] == [t.model_text for t in real.turns]
    worst = max(abs(a - b) for a, b in zip(stand_in.log_probs, real.log_probs, strict=True))
    assert worst < LOG_PROB_TOLERANCE
