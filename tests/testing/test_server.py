"""The SGLang-compatible test server over raw HTTP, in a thread and as a separate process."""

from __future__ import annotations

import base64
import io
import json
import urllib.error
import urllib.request

import numpy as np
import pytest
from PIL import Image

from vlm_envs.testing import Fault, ServerProcess


def post(url: str, body: bytes | dict, path: str = "/generate") -> tuple[int, dict | str]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read().decode()
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


def png_uri(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


@pytest.fixture(scope="module")
def request_body(tiny_engine):
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (56, 56, 3), dtype=np.uint8))
    text = tiny_engine.processor.apply_chat_template(
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Go"}]}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = tiny_engine.tokenizer(text, add_special_tokens=False)["input_ids"]
    return {
        "input_ids": ids,
        "image_data": [png_uri(image)],
        "sampling_params": {"max_new_tokens": 6, "temperature": 1.0, "ignore_eos": True},
        "return_logprob": True,
    }


def test_reply_has_sglang_shape(sglang_server, request_body):
    status, reply = post(sglang_server.url, request_body)
    assert status == 200
    meta = reply["meta_info"]
    assert meta["finish_reason"] == {"type": "length", "length": 6}
    assert meta["completion_tokens"] == 6
    triples = meta["output_token_logprobs"]
    assert len(triples) == 6 and all(len(t) == 3 and t[2] is None and t[0] < 0 for t in triples)
    assert isinstance(reply["text"], str)
    status, reply = post(sglang_server.url, {**request_body, "return_logprob": False})
    assert status == 200 and "output_token_logprobs" not in reply["meta_info"]


def test_stop_string_trimming(sglang_server, tiny_engine, request_body):
    ids = tuple(tiny_engine.tokenizer("<answer>Up</answer> more", add_special_tokens=False)["input_ids"])
    params = {"stop": "</answer>", "max_new_tokens": 50}
    for no_trim, text in ((False, "<answer>Up"), (True, "<answer>Up</answer>")):
        sglang_server.inject(Fault("tokens", token_ids=ids))
        status, reply = post(
            sglang_server.url, {**request_body, "sampling_params": {**params, "no_stop_trim": no_trim}}
        )
        assert status == 200
        assert reply["text"] == text
        assert reply["meta_info"]["finish_reason"] == {"type": "stop", "matched": "</answer>"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input_ids": []}, "input_ids"),
        ({"input_ids": [10**9]}, "input_ids"),
        ({"image_data": ["data:image/png;base64,!!!"]}, "image"),
        ({"image_data": ["/etc/passwd"]}, "image"),
        ({"image_data": []}, "no image_data"),
        ({"sampling_params": {"max_new_tokens": "many"}}, "ValueError"),
    ],
)
def test_bad_requests_get_400(sglang_server, request_body, change, message):
    status, reply = post(sglang_server.url, {**request_body, **change})
    assert status == 400
    assert message in reply["error"]


def test_unparseable_body_gets_400(sglang_server):
    status, reply = post(sglang_server.url, b"{not json")
    assert status == 400 and "bad request body" in reply["error"]


def test_health_and_model_info(sglang_server):
    with urllib.request.urlopen(sglang_server.url + "/health", timeout=10) as resp:
        assert resp.status == 200
    with urllib.request.urlopen(sglang_server.url + "/get_model_info", timeout=10) as resp:
        assert json.loads(resp.read())["is_generation"] is True


def test_faults_apply_in_order_to_the_next_requests(sglang_server, request_body):
    sglang_server.inject(Fault("status", status=502))
    sglang_server.inject(Fault("body", body="garbage", status=200))
    sglang_server.inject(Fault("abort"))
    assert post(sglang_server.url, request_body)[0] == 502
    assert post(sglang_server.url, request_body) == (200, "garbage")
    assert post(sglang_server.url, request_body)[1]["meta_info"]["finish_reason"]["type"] == "abort"
    assert post(sglang_server.url, request_body)[0] == 200


def test_server_process_matches_the_in_process_server(sglang_server, request_body):
    with ServerProcess("qwen2_vl", seed=0) as child:
        remote = post(child.url, request_body)
        local = post(sglang_server.url, request_body)
        assert remote[0] == local[0] == 200
        remote_out, local_out = (
            np.array(r[1]["meta_info"]["output_token_logprobs"])[:, :2] for r in (remote, local)
        )
        assert remote_out[:, 1].tolist() == local_out[:, 1].tolist()
        np.testing.assert_allclose(remote_out[:, 0].astype(float), local_out[:, 0].astype(float), atol=1e-5)
        child.inject(Fault("status", status=503), times=2)
        assert [post(child.url, request_body)[0] for _ in range(3)] == [503, 503, 200]
    assert child.proc.poll() is not None
