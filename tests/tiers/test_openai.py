"""The ``openai`` extra alone: docs/eval.md's ``vlm-envs eval ENV --policy openai:URL --model NAME``
(the installed script) against an OpenAI-compatible chat server on loopback. No model runs in that
tier, so the server is a stand-in that answers every request with the README's winning Sokoban reply
and keeps the requests: each episode's recorded rewards and observations are the in-process env's for
the same replies, and each request's first image is the env's first observation, pixel for pixel.
Runs in the main venv and in the ``openai`` tier (tests/tiers/run_tiers.py)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from PIL import Image
from readme_episode import CONFIG, SEED, WIN

from vlm_envs import build_env

EPISODES = 2  # seed 3 wins at once; seed 4 plays the same reply for its turns


class StandIn:
    """A chat server on a loopback port answering ``WIN``; ``requests`` holds each request body."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.loop = asyncio.new_event_loop()
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def _complete(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        choice = {"index": 0, "message": {"role": "assistant", "content": WIN}, "finish_reason": "stop"}
        usage = {"prompt_tokens": 100, "completion_tokens": 9, "total_tokens": 109}
        return web.json_response(
            {"id": "c", "object": "chat.completion", "choices": [choice], "usage": usage}
        )

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_post("/v1/chat/completions", self._complete)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"

    def __enter__(self) -> StandIn:
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.runner is not None
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


def _pixels(image: Image.Image) -> tuple[tuple[int, int], bytes]:
    return image.size, image.convert("RGB").tobytes()


def _first_image(body: dict[str, Any]) -> tuple[tuple[int, int], bytes]:
    """The first image_url part of the request's messages, decoded from its PNG data URI."""
    for message in body["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part["type"] == "image_url":
                url = part["image_url"]["url"]
                assert url.startswith("data:image/png;base64,")
                return _pixels(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    raise AssertionError(f"no image in the request: {body}")


def test_eval_against_an_openai_compatible_server(stand_in: StandIn, tmp_path: Path) -> None:
    out = tmp_path / "run"
    command = [str(Path(sys.executable).with_name("vlm-envs")), "eval", "sokoban"]
    command += ["--policy", f"openai:{stand_in.url}", "--model", "stand-in", "-n", str(EPISODES)]
    command += ["--seed", str(SEED), "--max-turns", "2", "--temperature", "0", "--max-tokens", "64"]
    command += [f"--config={key}={json.dumps(value)}" for key, value in CONFIG.items()]
    done = subprocess.run(
        [*command, "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = sorted(
        (json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()),
        key=lambda r: r["seed"],
    )
    assert [r["seed"] for r in records] == [SEED, SEED + 1]
    for record in records:  # the same replies played in process give the same episode
        env = build_env("sokoban", **CONFIG, max_turns=2)
        obs, _ = env.reset(seed=record["seed"])
        assert record["turns"][0]["observation"]["text"] == obs.text
        for turn in record["turns"][1:]:
            assert turn["model_text"] == WIN
            obs, done_locally, step = env.step(WIN)
            assert (turn["reward"], turn["done"], turn["observation"]["text"]) == (
                step.reward,
                done_locally,
                obs.text,
            )
        assert record["reward"] == env.episode_reward()
    assert records[0]["reward"] == 1.0 and records[0]["success"] and records[0]["num_turns"] == 1
    assert all(body["model"] == "stand-in" and body["temperature"] == 0 for body in stand_in.requests)
    firsts = {_first_image(body) for body in stand_in.requests}
    expected = {_pixels(build_env("sokoban", **CONFIG).reset(seed=s)[0].images[0]) for s in (SEED, SEED + 1)}
    assert firsts == expected
    assert len(stand_in.requests) == sum(r["num_turns"] for r in records)
