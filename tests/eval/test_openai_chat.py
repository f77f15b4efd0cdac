"""The openai policy's wire format and retries, against a recording OpenAI-compatible server over real HTTP.

The server here scripts its answers (structured tool calls, error statuses) so the test can check
what the client sends: images as PNG data URIs, tool observations as ``tool`` messages answering
the call, the assistant turn with its ``tool_calls``, and retries with backoff on 503 and 429.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import re
import socket
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from PIL import Image

from vlm_envs.eval import EvalConfig, PolicyOptions, run_eval
from vlm_envs.eval.openai_chat import (
    ChatError,
    OpenAIChatClient,
    parse_reply,
    reply_text,
    to_openai_messages,
)


class RecordingChatServer:
    """``POST /v1/chat/completions`` answering from a queue of ``(status, body)``; records requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answers: deque[tuple[int, Any]] = deque()
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application(client_max_size=64 << 20)
            app.router.add_post("/v1/chat/completions", self._complete)
            app.router.add_get("/v1/models", lambda r: web.json_response({"data": []}))
            self.runner = web.AppRunner(app)
            await self.runner.setup()
            await web.SockSite(self.runner, sock).start()
            ready.set()

        def run() -> None:
            self.loop.run_until_complete(serve())
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10)

    async def _complete(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        status, body = self.answers.popleft()
        if isinstance(body, bytes):  # sent as it is
            return web.Response(body=body, status=status, content_type="application/json")
        return web.json_response(body, status=status)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def _completion(content: str, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107},
    }


@pytest.fixture
def server() -> Iterator[RecordingChatServer]:
    s = RecordingChatServer()
    yield s
    s.stop()


def test_geo3k_episode_over_http_with_tool_call_retries_and_images(
    server: RecordingChatServer, tmp_path: Path
) -> None:
    call = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "calc_score", "arguments": json.dumps({"answer": "7"})},
    }
    server.answers.extend(
        [
            (503, {"error": "warming up"}),
            (429, {"error": "slow down"}),
            (200, _completion("Let me check.", [call])),
            (200, _completion("So the answer is \\boxed{7}.")),
        ]
    )
    options = PolicyOptions(model="m", tools=True, max_tokens=64)
    out = tmp_path / "run"
    config = EvalConfig(env="geo3k", policy=f"openai:{server.url}", n=1, out=out, options=options)
    summary = run_eval(config)
    assert summary["status_counts"] == {"completed": 1}, summary
    first, retry1, retry2, second = server.requests
    assert first == retry1 == retry2  # the same request, retried after 503 and 429
    assert first["model"] == "m" and first["max_tokens"] == 64 and first["temperature"] == 0.0
    assert first["tools"][0]["function"]["name"] == "calc_score"
    (user,) = first["messages"]
    image_parts = [p for p in user["content"] if p["type"] == "image_url"]
    assert len(image_parts) == 1
    header, data = image_parts[0]["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    diagram = Image.open(io.BytesIO(base64.b64decode(data)))
    record = json.loads((out / "results.jsonl").read_text())
    with Image.open(out / record["turns"][0]["observation"]["images"][0]) as saved:
        assert (
            diagram.size == saved.size and diagram.convert("RGB").tobytes() == saved.convert("RGB").tobytes()
        )

    assistant, tool = second["messages"][1:]
    assert assistant == {"role": "assistant", "content": "Let me check.", "tool_calls": [call]}
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_abc"
    assert tool["content"].startswith("calc_score result:")
    # the env saw the structured call as Hermes text and judged the boxed answer
    assert record["turns"][1]["metrics"]["tool_calls"] == 1
    assert record["turns"][1]["metrics"]["tool_call_errors"] == 0
    assert record["turns"][2]["model_text"] == "So the answer is \\boxed{7}."
    assert record["tokens"] == 107 and record["generated_tokens"] == 14


def test_permanent_errors_are_not_retried(server: RecordingChatServer, tmp_path: Path) -> None:
    server.answers.extend([(400, {"error": "bad model"})] * 2)
    config = EvalConfig(
        env="sokoban",
        policy=f"openai:{server.url}",
        n=2,
        out=tmp_path / "r",
        options=PolicyOptions(model="m"),
    )
    summary = run_eval(config)
    assert summary["status_counts"] == {"failed": 2}
    assert len(server.requests) == 2


def test_message_conversion_without_structured_calls() -> None:
    image = Image.new("RGB", (4, 3), "red")
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image", "image": image}]},
        {"role": "assistant", "content": '<tool_call>{"name": "calc_score"}</tool_call>'},
        {"role": "tool", "content": [{"type": "text", "text": "result"}, {"type": "image", "image": image}]},
    ]
    out = to_openai_messages(messages)
    assert out[0] == {"role": "system", "content": "be brief"}
    assert out[1]["content"][0] == {"type": "text", "text": "look"}
    assert out[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert out[2] == {"role": "assistant", "content": '<tool_call>{"name": "calc_score"}</tool_call>'}
    assert out[3] == {"role": "tool", "tool_call_id": "call_3", "content": "result"}
    assert out[4]["role"] == "user" and out[4]["content"][0]["type"] == "image_url"  # tool images follow


def test_reply_text_keeps_broken_arguments_and_rejects_malformed_replies() -> None:
    message = {
        "content": None,
        "tool_calls": [{"id": "1", "function": {"name": "calc_score", "arguments": '{"answer": '}}],
    }
    assert (
        reply_text(message)
        == '<tool_call>\n{"name": "calc_score", "arguments": "{\\"answer\\": "}\n</tool_call>'
    )
    for body in ({}, {"choices": []}, {"choices": [{"nomessage": 1}]}, []):
        with pytest.raises(ChatError):
            parse_reply(body)


def _complete(server: RecordingChatServer, **client_kwargs: Any) -> Any:
    async def main() -> Any:
        client = OpenAIChatClient(server.url, "m", backoff=0.01, **client_kwargs)
        try:
            return await client.complete([{"role": "user", "content": "hi"}], {})
        finally:
            await client.close()

    return asyncio.run(main())


def _choice(message: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


MALFORMED = [
    # (the server's body, what the error says)
    ({"choices": []}, "no 'choices' list with a first choice"),
    ({"choices": [[1]]}, "choices[0] has no 'message' object"),
    (_choice("hi"), "choices[0] has no 'message' object"),
    (_choice({"content": 5}), "message.content is of type int"),
    (_choice({"content": ["a", "b"]}), "message.content is a list holding non-objects"),
    (_choice({"content": "", "tool_calls": "call"}), "message.tool_calls is of type str"),
    (_choice({"content": "", "tool_calls": [5]}), "message.tool_calls is a list holding non-objects"),
    (
        _choice({"content": "", "tool_calls": [{"function": 5}]}),
        "message.tool_calls[0].function is of type int",
    ),
    (b'{"choices": [', "replied with invalid JSON"),
    (b'{"choices": "\xff\xfe"}', "replied with invalid JSON"),  # not UTF-8
    (b"[" * 100_000 + b"]" * 100_000, "replied with invalid JSON"),  # nested past the decoder's depth
]


@pytest.mark.parametrize(("body", "error"), MALFORMED, ids=lambda c: str(c)[:40])
def test_a_reply_that_is_not_a_chat_completion_fails_at_once_naming_what_is_wrong(
    server: RecordingChatServer, body: Any, error: str
) -> None:
    server.answers.extend([(200, body)] * 3)
    with pytest.raises(ChatError, match=re.escape(error)):
        _complete(server, max_retries=2)
    assert len(server.requests) == 1  # a malformed reply is not retried


def test_an_episode_whose_server_replies_malformed_fails_and_the_run_goes_on(
    server: RecordingChatServer, tmp_path: Path
) -> None:
    server.answers.extend(
        [(200, _choice({"content": {"text": "hi"}})), (200, _completion("<answer>Up</answer>"))]
    )
    out = tmp_path / "run"
    options = PolicyOptions(model="m", max_retries=0)
    config = EvalConfig(
        env="sokoban",
        policy=f"openai:{server.url}",
        n=2,
        out=out,
        options=options,
        max_turns=1,
        concurrency=1,
    )
    summary = run_eval(config)
    first, second = (json.loads(line) for line in (out / "results.jsonl").read_text().splitlines())
    assert first["status"] == "failed" and "message.content is of type dict" in first["error"]
    assert second["status"] != "failed" and summary["status_counts"]["failed"] == 1


def test_usage_and_finish_reason_that_are_not_what_they_name_are_dropped(server: RecordingChatServer) -> None:
    body = {
        "choices": [{"message": {"content": "hi"}, "finish_reason": {"type": "stop"}}],
        "usage": {"prompt_tokens": "many", "completion_tokens": -3},
    }
    server.answers.extend([(200, body), (200, {**body, "usage": "lots"})])
    for _ in range(2):
        reply = _complete(server)
        assert (reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == (
            "hi",
            None,
            None,
            None,
        )


def test_a_body_over_the_cap_fails_without_being_read_on_or_retried(server: RecordingChatServer) -> None:
    server.answers.extend([(200, _completion("x" * 20_000))] * 3)
    with pytest.raises(ChatError, match=r"reply passed max_body_bytes=4096: Content-Length is \d+ bytes"):
        _complete(server, max_body_bytes=4096, max_retries=2)
    assert len(server.requests) == 1
    server.answers.clear()
    server.answers.append((200, _completion("x" * 20_000)))
    assert _complete(server).text == "x" * 20_000  # the default cap is far above a completion


def test_tool_call_arguments_nested_past_the_decoders_depth_reach_the_env_as_written() -> None:
    deep = "[" * 100_000
    message = {"content": "", "tool_calls": [{"function": {"name": "calc_score", "arguments": deep}}]}
    assert json.loads(reply_text(message).split("\n")[1])["arguments"] == deep


def test_the_reachability_check_does_not_read_a_models_list_without_end() -> None:
    """``/models`` answering with a body that never ends: the server answered, the run starts."""

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        with contextlib.suppress(ConnectionError):
            while True:
                await response.write(b"x" * (1 << 20))
        return response

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/v1/models", endless)
        runner = web.AppRunner(app)
        await runner.setup()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        client = OpenAIChatClient(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", "m")
        try:
            await client.check_reachable(timeout=5.0)  # the old read of the body ran out this timeout
        finally:
            await client.close()
            await runner.cleanup()

    asyncio.run(main())
