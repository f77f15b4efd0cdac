"""SGLangEngine against the real HTTP test server: outputs, retries, deadlines, aborts, bad replies;
the reply contract every engine's output is checked against."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import socket

import numpy as np
import pytest
from PIL import Image
from rollout_helpers import EVERY

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import (
    Engine,
    EngineContractError,
    EngineOutput,
    EngineTimeout,
    PermanentEngineError,
    ReplyContract,
    TransientEngineError,
)
from vlm_envs.rollout.engines.image_uris import image_data_uri
from vlm_envs.rollout.engines.sglang import SGLangEngine, parse_generate_response
from vlm_envs.rollout.images import image_digest
from vlm_envs.testing import Fault


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
    async with SGLangEngine(url, **{"turn_timeout": 10.0, "backoff": 0.01, **engine_kwargs}) as engine:
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


def test_a_stalled_body_is_retried_then_reported(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("stall", seconds=5.0))  # headers and half the body, then nothing
    before = len(sglang_server.requests)
    params = {"max_new_tokens": 2}
    out = run(generate(sglang_server.url, enc.ids, enc.pil_images, params, read_timeout=0.3, max_retries=1))
    assert len(out.token_ids) == 2 and len(sglang_server.requests) - before == 2
    sglang_server.inject(Fault("stall", seconds=5.0), times=2)
    with pytest.raises(EngineTimeout, match=r"no progress for read_timeout=0.3 s"):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, params, read_timeout=0.3, max_retries=1))


@pytest.mark.parametrize("fault", [Fault("delay", seconds=5.0), Fault("drip", seconds=0.05)])
def test_the_turn_deadline_ends_a_silent_or_dripping_server(sglang_server, prompt, fault):
    """No answer yet (SGLang answers when done), or one byte at a time: the turn cap ends both."""
    _, enc = prompt
    sglang_server.inject(fault, times=3)
    before = len(sglang_server.requests)
    with pytest.raises(EngineTimeout, match=r"sglang http://127\.0\.0\.1:\d+: .*turn_timeout=1 s"):
        run(
            generate(
                sglang_server.url,
                enc.ids,
                enc.pil_images,
                {"max_new_tokens": 2},
                read_timeout=0.5,
                turn_timeout=1.0,
                max_retries=2,
            )
        )
    assert len(sglang_server.requests) - before == 1  # the turn's time was spent on one attempt


def test_a_fast_drip_ends_at_the_turn_deadline_not_when_its_body_is_done(sglang_server, prompt):
    """A byte every half millisecond: a read often completes in the loop step that the turn's
    deadline cancels it (asyncio.wait_for up to Python 3.11 then kept the read and lost the cancel,
    and the turn lasted until the whole body, seconds, had come)."""
    _, enc = prompt
    sglang_server.inject(Fault("drip", seconds=0.0005), times=EVERY)
    params = {"max_new_tokens": 64, "ignore_eos": True}  # a body of a few KB: seconds of dripping
    for _ in range(5):
        with pytest.raises(EngineTimeout, match=r"turn_timeout=0\.2 s"):
            run(
                generate(
                    sglang_server.url,
                    enc.ids,
                    enc.pil_images,
                    params,
                    read_timeout=0.1,
                    turn_timeout=0.2,
                    max_retries=0,
                )
            )


def test_a_body_over_the_cap_fails_without_retry(sglang_server, prompt):
    _, enc = prompt
    sglang_server.inject(Fault("huge_body"))  # 50 MB, chunked, no Content-Length
    before = len(sglang_server.requests)
    params = {"max_new_tokens": 64}
    with pytest.raises(EngineContractError, match=r"body of at most 1081344 bytes.*more than"):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, params, max_retries=3))
    assert len(sglang_server.requests) - before == 1
    # an explicit cap; a normal reply announces its length, so it fails before its body is read
    with pytest.raises(EngineContractError, match=r"body of at most 100 bytes.*Content-Length"):
        run(generate(sglang_server.url, enc.ids, enc.pil_images, params, max_body_bytes=100))


def test_the_body_cap_follows_the_request():
    engine = SGLangEngine("http://127.0.0.1:1")
    assert engine.body_limit({"max_new_tokens": 64}) == 64 * 512 + (1 << 20)
    assert engine.body_limit({}) == 128 * 512 + (1 << 20)  # SGLang's default max_new_tokens
    assert SGLangEngine("http://x", max_body_bytes=10).body_limit({"max_new_tokens": 64}) == 10
    for bad in ({"read_timeout": 0}, {"turn_timeout": math.inf}, {"read_timeout": "60"}):
        with pytest.raises(ValueError, match="positive number of seconds"):
            SGLangEngine("http://x", **bad)


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
        ({"text": "", "meta_info": {"finish_reason": {"type": "stop"}}}, "no output_token_logprobs"),
        (
            {
                "text": "",
                "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": [[-0.5]]},
            },
            r"one log prob per token id.*\[0\]",
        ),
        ({"text": 5, "meta_info": {"finish_reason": {"type": "stop"}, "output_token_logprobs": []}}, "text"),
        ({"meta_info": {"finish_reason": None}}, "malformed"),
    ],
)
def test_parse_rejects_a_reply_of_the_wrong_shape(body, match):
    with pytest.raises(EngineContractError, match=match):
        parse_generate_response(body)


def test_parse_keeps_values_as_sent():
    """Values are the contract's to judge: nothing is coerced (27.7 and true stay what they are)."""
    triples = [[-0.5, 27.7, None], [-0.25, True, None], ["-1", 3, None]]
    out = parse_generate_response(
        {"meta_info": {"finish_reason": {"type": "done"}, "output_token_logprobs": triples}}
    )
    assert out.token_ids == [27.7, True, 3] and out.log_probs == [-0.5, -0.25, "-1"]
    assert out.finish_reason == "done"


def test_parse_accepts_abort_without_logprobs():
    out = parse_generate_response({"text": "", "meta_info": {"finish_reason": {"type": "abort"}}})
    assert out.finish_reason == "abort" and out.token_ids == []


def reply(ids, log_probs=None, finish="stop"):
    return EngineOutput(list(ids), [-0.5] * len(ids) if log_probs is None else list(log_probs), finish)


@pytest.mark.parametrize(
    ("output", "rule", "detail"),
    [
        (reply([1, 565]), "token ids in [0, vocab_size)", "token id 565 at position 1"),
        (reply([1, 10**9]), "token ids in [0, vocab_size)", "1000000000"),
        (reply([-1, 2]), "token ids in [0, vocab_size)", "token id -1 at position 0"),
        (reply([1, 27.7]), "token ids are ints", "27.7 at position 1 is a float"),
        (reply([True]), "token ids are ints", "True at position 0 is a bool"),
        (reply([1, 2], [-0.5, 5.0]), "log probs are finite and <= 0", "5.0 at position 1 is > 0"),
        (reply([1], [1e308]), "log probs are finite and <= 0", "1e+308"),
        (reply([1], [math.nan]), "log probs are finite and <= 0", "return_logprob"),
        (reply([1], [-math.inf]), "log probs are finite and <= 0", "-inf"),
        (reply([1], [None]), "log probs are numbers", "NoneType"),
        (reply([1], [False]), "log probs are numbers", "bool"),
        (reply([1, 2], [-0.5]), "one log prob per token id", "2 token ids but 1 log probs"),
        (reply([1], finish="done"), "a known finish reason", "'done'"),
    ],
)
def test_the_contract_rejects_each_broken_rule(output, rule, detail):
    with pytest.raises(EngineContractError) as caught:
        ReplyContract(vocab_size=565, max_new_tokens=8, engine="my-engine").check(output)
    err = caught.value
    assert err.engine == "my-engine" and err.rule == rule and err.kept is None
    assert str(err).startswith(f"my-engine broke the reply contract ({rule}): ") and detail in str(err)


def test_the_contract_keeps_the_first_max_new_tokens_of_a_longer_reply():
    with pytest.raises(EngineContractError, match=r"at most max_new_tokens.*5007 tokens") as caught:
        ReplyContract(565, 64).check(reply([i % 500 for i in range(5007)]))
    kept = caught.value.kept
    assert kept.token_ids == [i % 500 for i in range(64)] and kept.log_probs == [-0.5] * 64
    assert kept.finish_reason == "length"
    with pytest.raises(EngineContractError, match="token ids in"):  # any other break rejects it all
        ReplyContract(565, 4).check(reply([1, 2, 3, 4, 5, 600]))


def test_the_contract_accepts_integers_and_rounding_and_gives_plain_types():
    out = ReplyContract(565, 8).check(reply([np.int64(3), 0, 564], [np.float32(-0.5), -3, 4e-7]))
    assert out.token_ids == [3, 0, 564] and [type(t) for t in out.token_ids] == [int] * 3
    assert out.log_probs == [-0.5, -3.0, 0.0] and [type(lp) for lp in out.log_probs] == [float] * 3
    assert ReplyContract(565, 0).check(reply([], finish="abort")).token_ids == []


def test_the_old_timeout_keyword_names_the_ones_that_replaced_it():
    """``timeout=`` was split into ``read_timeout`` and ``turn_timeout``; code written for the old
    client is told which to pass instead of a bare 'unexpected keyword argument'."""
    with pytest.raises(TypeError, match=r"no longer takes timeout=30: pass read_timeout=.*turn_timeout="):
        SGLangEngine("http://x", timeout=30)
