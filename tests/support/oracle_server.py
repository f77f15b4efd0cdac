"""An OpenAI-compatible chat server on loopback (FastAPI under uvicorn) that plays the oracle.

Each ``POST /v1/chat/completions`` names its episode by its first user message (the task prompt
of one of ``episodes``); the server replays the conversation's assistant replies on a fresh env of
that seed, answers with the env's oracle reply (as JSON, or as server-sent events when the request
streams), and records whether every user message's images are, pixel for pixel, the in-process
env's observation images of that turn.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from PIL import Image

from vlm_envs import build_env
from vlm_envs.interop.verifiers import content


@dataclasses.dataclass(frozen=True)
class Episode:
    env: str
    seed: int
    config: dict[str, Any]


@dataclasses.dataclass
class Seen:
    """One request: its episode, how many replies it holds, and whether its images are the env's."""

    episode: Episode
    turn: int
    images: int
    images_match: bool


def pixels(url: str) -> bytes:
    data = base64.b64decode(url.split(",", 1)[1])
    return Image.open(io.BytesIO(data)).convert("RGB").tobytes()


def first_user_key(messages: Sequence[dict[str, Any]]) -> str:
    """A digest of the first user message's text and image pixels."""
    user = next(m for m in messages if m["role"] == "user")
    parts = (
        user["content"] if isinstance(user["content"], list) else [{"type": "text", "text": user["content"]}]
    )
    digest = hashlib.sha256()
    for part in parts:
        if part["type"] == "text":
            digest.update(part["text"].encode())
        else:
            digest.update(pixels(part["image_url"]["url"]))
    return digest.hexdigest()


def user_images(message: dict[str, Any]) -> list[bytes]:
    parts = message["content"] if isinstance(message["content"], list) else []
    return [pixels(p["image_url"]["url"]) for p in parts if p.get("type") == "image_url"]


class OracleServer:
    """The app and its uvicorn server in a thread; ``url`` once started (a context manager)."""

    def __init__(self, episodes: Sequence[Episode]) -> None:
        self.episodes: dict[str, Episode] = {}
        for episode in episodes:
            env = build_env(episode.env, **episode.config)
            obs, _ = env.reset(seed=episode.seed)
            parts = [p.model_dump() for p in content(obs)]
            self.episodes[first_user_key([{"role": "user", "content": parts}])] = episode
        self.seen: list[Seen] = []
        self.app = FastAPI()
        self.app.post("/v1/chat/completions")(self._chat)
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=0, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> OracleServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the oracle server did not start")
            time.sleep(0.05)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _chat(self, request: Request) -> Any:
        body = await request.json()
        reply = self.play(body["messages"])
        model = body.get("model", "oracle")
        if body.get("stream"):
            return StreamingResponse(self._events(reply, model), media_type="text/event-stream")
        return JSONResponse(
            {
                "id": "chatcmpl-oracle",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    def play(self, messages: list[dict[str, Any]]) -> str:
        """The oracle's reply after the conversation's replies, recording what the request held."""
        episode = self.episodes[first_user_key(messages)]
        env = build_env(episode.env, **episode.config)
        obs, _ = env.reset(seed=episode.seed)
        expected = [[im.convert("RGB").tobytes() for im in obs.images]]
        replies = [m for m in messages if m["role"] == "assistant"]
        for reply in replies:
            obs, _, _ = env.step(reply.get("content") or "")
            expected.append([im.convert("RGB").tobytes() for im in obs.images])
        got = [user_images(m) for m in messages if m["role"] == "user"]
        self.seen.append(Seen(episode, len(replies), sum(map(len, got)), got == expected[: len(got)]))
        return env.oracle_response() or ""

    def _events(self, reply: str, model: str) -> Iterator[str]:
        chunk = {
            "id": "chatcmpl-oracle",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }
        deltas = [
            ({"role": "assistant", "content": reply}, None),
            ({}, "stop"),
        ]
        for delta, finish in deltas:
            yield (
                "data: "
                + json.dumps({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                + "\n\n"
            )
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        yield "data: " + json.dumps({**chunk, "choices": [], "usage": usage}) + "\n\n"
        yield "data: [DONE]\n\n"
