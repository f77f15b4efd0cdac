"""VLLMEngine's own checks, against a loopback server that answers in vLLM 0.32's reply shape.

The real vLLM is tests/real_engine's; here the server says what vLLM would not (a wrong prompt, no
log probs), which the engine must catch, and records what the engine sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from PIL import Image

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineContractError, PermanentEngineError, ReplyContract
from vlm_envs.rollout.engines.vllm import VLLMEngine, collapse_pads, parse_vllm_reply
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.testing import build_tiny_processor

PAD = 7
Reply = Callable[[dict[str, Any]], dict[str, Any]]


def reply_for(prompt: list[int], tokens: list[int], finish: str = "stop", **choice: Any) -> dict[str, Any]:
    """A vLLM ``/inference/v1/generate`` reply (``return_token_ids``, ``logprobs: 0``)."""
    content = [{"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": []} for t in tokens]
    return {
        "request_id": "r",
        "prompt_token_ids": prompt,
        "choices": [
            {
                "index": 0,
                "token_ids": tokens,
                "logprobs": {"content": content},
                "finish_reason": finish,
                **choice,
            }
        ],
    }


class VLLMShape:
    """Records requests; answers each with ``reply(request)``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply: Reply = lambda request: reply_for(request["token_ids"], [1, 2])

    async def handle(self, request: web.Request) -> web.Response:
        payload = await request.json()
        self.requests.append(payload)
        return web.json_response(self.reply(payload))


@pytest.fixture
def server() -> Iterator[tuple[VLLMShape, str]]:
    shape = VLLMShape()
    app = web.Application()
    app.router.add_post("/inference/v1/generate", shape.handle)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    shape.loop = loop  # type: ignore[attr-defined]
    yield shape, f"http://127.0.0.1:{port}"
    loop.run_until_complete(runner.cleanup())
    loop.close()


def call(
    shape: VLLMShape, engine: VLLMEngine, ids: list[int], images: list[str], params: dict[str, Any]
) -> Any:
    async def go() -> Any:
        try:
            return await engine.generate(ids, images, params)
        finally:
            await engine.close()

    return shape.loop.run_until_complete(go())  # type: ignore[attr-defined]


def test_collapse_pads_keeps_one_pad_per_run() -> None:
    assert collapse_pads([1, PAD, PAD, PAD, 2, PAD, 3], PAD) == ([1, PAD, 2, PAD, 3], 2)
    assert collapse_pads([1, 2], None) == ([1, 2], 0)


def test_the_request_sends_one_pad_per_image_and_vllm_sampling_params(server: tuple[VLLMShape, str]) -> None:
    shape, url = server
    ids = [1, PAD, PAD, PAD, PAD, 2, PAD, PAD, 3]
    shape.reply = lambda request: reply_for(ids, [4, 5], "length")
    out = call(shape, VLLMEngine(url, image_token_id=PAD), ids, ["data:a", "data:b"], {"max_new_tokens": 2})
    (sent,) = shape.requests
    assert sent["token_ids"] == [1, PAD, 2, PAD, 3]
    assert sent["content_parts"] == [{"type": "image_url", "url": u} for u in ("data:a", "data:b")]
    assert sent["sampling_params"] == {"max_tokens": 2, "logprobs": 0}
    assert sent["return_token_ids"] is True
    assert (out.token_ids, out.log_probs, out.finish_reason) == ([4, 5], [-0.5, -0.5], "length")


@pytest.mark.parametrize("images", [[], ["data:a"], ["data:a", "data:b", "data:c"]])
def test_images_that_do_not_match_the_pad_runs_are_never_sent(
    server: tuple[VLLMShape, str], images: list[str]
) -> None:
    shape, url = server
    with pytest.raises(PermanentEngineError, match="run"):
        call(shape, VLLMEngine(url, image_token_id=PAD), [1, PAD, PAD, 2, PAD, 3], images, {})
    assert shape.requests == []


def test_a_prompt_vllm_built_otherwise_breaks_the_contract(server: tuple[VLLMShape, str]) -> None:
    """vLLM resized an image to another grid: its pad run is longer than the trajectory's."""
    shape, url = server
    shape.reply = lambda request: reply_for([1, PAD, PAD, PAD, 2], [4])
    with pytest.raises(EngineContractError, match="prompt the engine saw") as caught:
        call(shape, VLLMEngine(url, image_token_id=PAD), [1, PAD, PAD, 2], ["data:a"], {})
    assert "first different at position 3" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ({"choices": []}, "reply shape"),
        ({"prompt_token_ids": [1], "choices": [{"token_ids": [4], "logprobs": None}]}, "reply shape"),
        (
            {"prompt_token_ids": [1], "choices": [{"token_ids": 4, "logprobs": {"content": []}}]},
            "reply shape",
        ),
        (
            {
                "prompt_token_ids": [1],
                "choices": [{"token_ids": [4], "logprobs": {"content": [{"token_id": 5}]}}],
            },
            "one log prob per token id",
        ),
        (
            {
                "prompt_token_ids": [1],
                "choices": [{"token_ids": [4], "logprobs": {"content": [{"token_id": 5, "logprob": -1.0}]}}],
            },
            "one log prob per token id",
        ),
        (
            {"choices": [{"token_ids": [4], "logprobs": {"content": [{"token_id": 4, "logprob": -1.0}]}}]},
            "prompt",
        ),
    ],
)
def test_malformed_replies_name_the_rule(body: dict[str, Any], rule: str) -> None:
    with pytest.raises(EngineContractError, match=rule):
        parse_vllm_reply(body, [1])


def test_finish_reasons_map_to_the_contracts() -> None:
    assert parse_vllm_reply(reply_for([1], [4], "repetition"), [1]).finish_reason == "stop"
    assert parse_vllm_reply(reply_for([1], [4], "abort"), [1]).finish_reason == "abort"
    assert parse_vllm_reply(reply_for([1], [4], "stop", stop_reason=9), [1]).matched_stop == 9
    odd = parse_vllm_reply(reply_for([1], [4], "error"), [1])
    with pytest.raises(EngineContractError, match="known finish reason"):
        ReplyContract(vocab_size=10, max_new_tokens=4, engine="vllm").check(odd)


def test_an_episode_whose_prompt_vllm_misread_fails_naming_the_engine(server: tuple[VLLMShape, str]) -> None:
    """The episode loop turns the broken contract into a FAILED trajectory, never a crash."""
    shape, url = server
    shape.reply = lambda request: reply_for(request["token_ids"], [4])  # the collapsed ids: one pad each
    codec = ChatCodec(build_tiny_processor())
    env = build_env("sokoban", grid_size=(6, 6), num_boxes=1, render_mode="vision")
    engine = VLLMEngine(url, image_token_id=codec.image_token_id)

    async def go() -> Any:
        try:
            return await run_episode(env, engine, codec, seed=0, config=EpisodeConfig(max_turns=2))
        finally:
            await engine.close()

    traj = shape.loop.run_until_complete(go())  # type: ignore[attr-defined]
    assert traj.status is Status.FAILED
    assert "vllm http://127.0.0.1" in traj.error and "prompt the engine saw" in traj.error
    assert len(shape.requests) == 1 and shape.requests[0]["content_parts"]


def test_a_text_only_engine_takes_no_images(server: tuple[VLLMShape, str]) -> None:
    shape, url = server
    image = Image.new("RGB", (28, 28))
    with pytest.raises(PermanentEngineError, match="1 image"):
        call(shape, VLLMEngine(url, image_token_id=None), [1, 2], [image], {})  # type: ignore[list-item]
    assert shape.requests == []
