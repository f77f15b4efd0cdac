"""The TRL rollout's vLLM engine through TRL's own ``VLLMClient`` over loopback HTTP, against a
stand-in for ``trl vllm-serve`` (vLLM does not install here) generating with the tiny model: each
image's features point at its pad run in our ids, budgets and stop ids reach the server, and the
log probs kept are the model's for the tokens kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

pytest.importorskip("trl")

import trl.generation.vllm_client as vllm_client_module
from trl_vllm_server import TrlVLLMStandIn

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.rollout.trl import VLLMSampling, VLLMServerEngine
from vlm_envs.testing import TinyEngine


@pytest.fixture(scope="module")
def client(tiny_engine: TinyEngine) -> Iterator[tuple[object, TrlVLLMStandIn]]:
    with TrlVLLMStandIn(tiny_engine) as server, pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            vllm_client_module, "is_vllm_available", lambda *a, **k: True
        )  # the client's import guard
        yield vllm_client_module.VLLMClient(base_url=server.url), server


def test_a_sokoban_episode_through_trls_vllm_client(client: tuple, tiny_engine: TinyEngine) -> None:
    vllm, server = client
    codec = ChatCodec(tiny_engine.processor)
    sampling = VLLMSampling(generation_kwargs={"max_tokens": 999, "stop_token_ids": [7]})
    engine = VLLMServerEngine(vllm, sampling, codec.image_token_id)
    config = EpisodeConfig(max_turns=3, max_new_tokens=10, max_response_tokens=300, engine_images="pil")
    env = build_env("sokoban")
    traj = asyncio.run(run_episode(env, engine, codec, seed=2, config=config))
    assert traj.status is not Status.FAILED, traj.error
    assert len(traj.turns) >= 2 and len(traj.images) == len(traj.turns)
    generates = server.requests[-len(traj.turns) :]
    for turn, request in enumerate(generates):
        params = request["sampling_params"]
        assert (
            params["max_tokens"] <= 10 and params["logprobs"] == 0
        )  # the episode's budget, not the user's 999
        assert {7, codec.end_of_turn_id} <= set(params["stop_token_ids"])
        assert len(request["features"]["images"]) == turn + 1  # every image so far, placed on its pad run
    prompt = tiny_engine.prepare(list(traj.prompt_ids), [im.image for im in traj.images[:1]])
    first = traj.turns[0].reply
    assert first.log_probs == pytest.approx(tiny_engine.score(prompt, list(first.ids)), abs=1e-5)


def test_a_text_only_prompt_goes_to_the_completions_endpoint(client: tuple, tiny_engine: TinyEngine) -> None:
    vllm, server = client
    codec = ChatCodec(tiny_engine.processor)
    engine = VLLMServerEngine(vllm, VLLMSampling(), codec.image_token_id)
    ids = codec.encode_prompt([{"role": "user", "content": "Say something."}]).ids
    out = asyncio.run(
        engine.generate(ids, [], {"max_new_tokens": 5, "stop_token_ids": [codec.end_of_turn_id]})
    )
    assert 1 <= len(out.token_ids) <= 5 and len(out.log_probs) == len(out.token_ids)
    assert server.requests[-1]["prompt"] == [list(ids)]
    assert out.log_probs == pytest.approx(
        tiny_engine.score(tiny_engine.prepare(list(ids), []), out.token_ids), abs=1e-5
    )
