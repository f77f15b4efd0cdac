"""The TRL rollout's vLLM engine has deadlines (TRL's ``VLLMClient`` posts with none): against a
loopback ASGI server (Starlette on uvicorn) that takes every request and never answers, an episode
ends FAILED with the engine named, in bounded time, and a request's read deadline reaches the socket."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("trl")
pytest.importorskip("starlette")

import trl.generation.vllm_client as vllm_client_module
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from urllib3.util.retry import Retry

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import TransientEngineError
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status
from vlm_envs.rollout.trl import VLLMSampling, VLLMServerEngine
from vlm_envs.testing import build_tiny_processor


async def never(request: Request) -> JSONResponse:
    await request.body()
    await asyncio.Event().wait()  # the request is read, the reply never comes
    raise AssertionError("unreachable")


async def health(request: Request) -> JSONResponse:
    return JSONResponse({})


async def models(request: Request) -> JSONResponse:
    return JSONResponse({"data": [{"id": "tiny"}]})


APP = Starlette(
    routes=[
        Route("/health", health),
        Route("/v1/models", models),
        *(
            Route(path, never, methods=["POST"])
            for path in ("/v1/chat/completions/render", "/inference/v1/generate")
        ),
        Route("/v1/completions", never, methods=["POST"]),
    ]
)


@pytest.fixture(scope="module")
def silent_server() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(APP, log_level="critical", timeout_graceful_shutdown=1, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def client(silent_server: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(vllm_client_module, "is_vllm_available", lambda *a, **k: True)  # its import guard
    return vllm_client_module.VLLMClient(base_url=silent_server)


def test_a_server_that_never_answers_fails_the_episode_in_bounded_time(client: Any) -> None:
    codec = ChatCodec(build_tiny_processor())
    engine = VLLMServerEngine(client, VLLMSampling(), codec.image_token_id, read_timeout=60, turn_timeout=1.5)
    config = EpisodeConfig(max_turns=2, max_new_tokens=8, engine_images="pil")
    start = time.perf_counter()
    traj = asyncio.run(run_episode(build_env("sokoban"), engine, codec, seed=0, config=config))
    engine.close()
    assert time.perf_counter() - start < 10
    assert traj.status is Status.FAILED
    assert "TRL vLLM server" in traj.error and "turn_timeout=1.5" in traj.error


def test_the_read_deadline_reaches_the_clients_requests(client: Any) -> None:
    """With the client's own retries off (TRL retries a read 5 times, backing off up to 32 s: the
    turn deadline bounds that), one stalled read ends at read_timeout, the engine named."""
    codec = ChatCodec(build_tiny_processor())
    engine = VLLMServerEngine(client, VLLMSampling(), codec.image_token_id, read_timeout=0.5, turn_timeout=60)
    client.session.get_adapter("http://").inner.max_retries = Retry(0, read=0)
    ids = codec.encode_prompt([{"role": "user", "content": "Say something."}]).ids
    start = time.perf_counter()
    with pytest.raises(TransientEngineError, match=r"TRL vLLM server: .*(Timeout|timed out)"):
        engine._bounded(list(ids), [], {"max_new_tokens": 4})
    assert time.perf_counter() - start < 5
    engine.close()


def test_deadlines_must_be_positive_and_finite(client: Any) -> None:
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="turn_timeout"):
            VLLMServerEngine(client, VLLMSampling(), None, turn_timeout=bad)
