"""SGLangEngine against the real HTTP test server: outputs, retries, timeouts, aborts, bad replies."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import socket

import numpy as np
import pytest
from PIL import Image

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines import (
    Engine,
    EngineTimeout,
    PermanentEngineError,
    SGLangEngine,
    TransientEngineError,
    image_data_uri,
    parse_generate_response,
)
from vlm_envs.rollout.images import image_digest
from vlm_envs.testing import Fault


@pytest.fixture(autouse=True)
def no_leftover_faults(sglang_server):
    sglang_server.clear_faults()
    yield
    sglang_server.clear_faults()


@pytest.fixture(scope="module")
def prompt(tiny_engine):
    codec = ChatCodec(tiny_engine.processor)
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (70, 90, 3), dtype=np.uint8))
    messages = [
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "Go"}]}
    ]
    return codec, codec.encode_prompt(messages)


def run(coro):
    return asyncio.run(coro)


async def generate(url, ids, images, params, **engine_kwargs):
    async with SGLangEngine(url, **{"timeout": 10.0, "backoff": 0.01, **engine_kwargs}) as engine:
        return await engine.generate(ids, images, params)


def test_output_ids_and_log_probs_are_the_models(sglang_server, tiny_engine, prompt):
    _, enc = prompt
    out = run(
        generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 12, "ignore_eos": True})
    )
    assert out.finish_reason == "length"
    assert len(out.token_ids) == len(out.log_probs) == 12
    expected = tiny_engine.score(tiny_engine.prepare(enc.ids, enc.pil_images), out.token_ids)
    np.testing.assert_allclose(out.log_probs, expected, atol=1e-4)
    assert out.text == tiny_engine.tokenizer.decode(out.token_ids, skip_special_tokens=True)
    # one unexpanded placeholder per image gives the same generation
    same = run(
        generate(
            sglang_server.url, enc.engine_ids, enc.pil_images, {"max_new_tokens": 12, "ignore_eos": True}
        )
    )
    assert same.token_ids == out.token_ids
    assert sglang_server.requests[-1]["image_data"] == 1


def test_stop_token_and_stop_string(sglang_server, prompt):
    codec, enc = prompt
    answer = codec.tokenize("<answer>Left</answer> trailing")
    sglang_server.inject(Fault("tokens", token_ids=(*answer, codec.end_of_turn_id)))
    out = run(generate(sglang_server.url, enc.ids, enc.pil_images, {"stop": ["</answer>"]}))
    assert out.finish_reason == "stop" and out.matched_stop == "</answer>"
    assert codec.decode(out.token_ids).endswith("</answer>")
    assert out.text == "<answer>Left"
    assert all(math.isfinite(lp) and lp < 0 for lp in out.log_probs)

    sglang_server.inject(Fault("tokens", token_ids=(*answer, codec.end_of_turn_id)))
    out = run(generate(sglang_server.url, enc.ids, enc.pil_images, {}))
    assert out.token_ids[-1] == codec.end_of_turn_id
    assert out.finish_reason == "stop" and out.matched_stop == codec.end_of_turn_id


def test_sampling_params_are_not_changed(sglang_server, prompt):
    _, enc = prompt
    params = {"max_new_tokens": 2, "stop": ["x"]}
    run(generate(sglang_server.url, enc.ids, enc.pil_images, params))
    assert params == {"max_new_tokens": 2, "stop": ["x"]}


def test_5xx_is_retried_until_it_recovers(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("status", status=500), times=2)
    sglang_server.inject(Fault("drop"))  # a connection closed without an answer is transient too
    before = len(sglang_server.requests)
    out = run(generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 3}, max_retries=3))
    assert len(out.token_ids) == 3
    assert len(sglang_server.requests) - before == 4


def test_retries_run_out(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("status", status=503), times=5)
    before = len(sglang_server.requests)
    with pytest.raises(TransientEngineError, match="503"):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 3}, max_retries=2))
    assert len(sglang_server.requests) - before == 3


@pytest.mark.parametrize("status", [400, 404, 422])
def test_4xx_is_not_retried(sglang_server, prompt, status):
    _, enc = prompt
    sglang_server.inject(Fault("status", status=status))
    before = len(sglang_server.requests)
    with pytest.raises(PermanentEngineError, match=str(status)):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 3}, max_retries=3))
    assert len(sglang_server.requests) - before == 1


def test_server_rejects_image_token_mismatch(sglang_server, prompt):
    codec, enc = prompt
    one_pad_short = list(enc.ids)
    one_pad_short.remove(codec.image_token_id)
    with pytest.raises(PermanentEngineError, match="image features and image tokens do not match"):
        run(generate(sglang_server.url, one_pad_short, enc.pil_images, {"max_new_tokens": 2}))
    with pytest.raises(PermanentEngineError, match="no image_data"):
        run(generate(sglang_server.url, enc.ids, [], {"max_new_tokens": 2}))


def test_timeout_is_retried_then_reported(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("delay", seconds=1.0))
    out = run(
        generate(
            sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 2}, timeout=0.3, max_retries=1
        )
    )
    assert len(out.token_ids) == 2
    sglang_server.inject(Fault("delay", seconds=1.0), times=2)
    with pytest.raises(EngineTimeout):
        run(
            generate(
                sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 2}, timeout=0.3, max_retries=1
            )
        )


def test_abort_is_an_output(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("abort"))
    out = run(generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 5}))
    assert out.finish_reason == "abort" and out.token_ids == [] and out.log_probs == []


@pytest.mark.parametrize("body", ['{"text": "x", "meta_info": ', '{"text": "x"}', "[1, 2]", ""])
def test_malformed_replies_fail_without_retry(sglang_server, prompt, body):
    _, enc = prompt
    sglang_server.inject(Fault("body", body=body))
    before = len(sglang_server.requests)
    with pytest.raises(PermanentEngineError, match=r"JSON|malformed"):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, {"max_new_tokens": 3}, max_retries=3))
    assert len(sglang_server.requests) - before == 1


def test_server_down_is_transient():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(TransientEngineError, match="connection"):
        run(generate(f"http://127.0.0.1:{port}", [1, 2, 3], [], {}, max_retries=2))


def test_concurrent_requests_share_pooled_connections(sglang_server, prompt):
    _, enc = prompt

    async def many() -> list:
        async with SGLangEngine(sglang_server.url, max_connections=4) as engine:
            assert isinstance(engine, Engine)
            first = await asyncio.gather(
                *(engine.generate(enc.ids, enc.pil_images, {"max_new_tokens": 2}) for _ in range(12))
            )
            second = await asyncio.gather(
                *(engine.generate(enc.ids, enc.pil_images, {"max_new_tokens": 2}) for _ in range(12))
            )
            return first + second

    before = len(sglang_server.requests)
    outs = run(many())
    assert all(len(o.token_ids) == 2 for o in outs)
    peers = {tuple(r["_peer"]) for r in sglang_server.requests[before:]}
    assert len(sglang_server.requests) - before == 24
    assert len(peers) <= 4  # 24 requests over at most 4 kept-alive connections


def test_image_data_uri_formats():
    image = Image.fromarray(np.random.default_rng(1).integers(0, 256, (20, 30, 3), dtype=np.uint8))
    uri = image_data_uri(image)
    assert uri.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert np.array_equal(np.asarray(decoded), np.asarray(image))
    assert image_data_uri(image.copy()) is uri  # cached by content
    assert image_data_uri(image, key=image_digest(image)) is uri
    buf = io.BytesIO()
    image.save(buf, format="JPEG")
    assert image_data_uri(buf.getvalue()).startswith("data:image/jpeg;base64,")
    assert image_data_uri("data:image/png;base64,AAAA") == "data:image/png;base64,AAAA"
    with pytest.raises(ValueError):
        image_data_uri(b"not an image")
    with pytest.raises(TypeError):
        image_data_uri(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (
            {"text": "", "meta_info": {"finish_reason": {"type": "done"}, "output_token_logprobs": []}},
            "finish",
        ),
        ({"text": "", "meta_info": {"finish_reason": {"type": "stop"}}}, "malformed"),
        (
            {
                "text": "",
                "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": [[None, 3]]},
            },
            "malformed",
        ),
        (
            {
                "text": "",
                "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": [[-1e999, 3]]},
            },
            "non-finite",
        ),
        ({"text": 5, "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": []}}, "text"),
        ({"meta_info": {"finish_reason": None}}, "malformed"),
    ],
)
def test_parse_rejects_protocol_breaks(body, match):
    with pytest.raises(PermanentEngineError, match=match):
        parse_generate_response(body)


def test_parse_accepts_abort_without_logprobs():
    out = parse_generate_response({"text": "", "meta_info": {"finish_reason": {"type": "abort"}}})
    assert out.finish_reason == "abort" and out.token_ids == []
