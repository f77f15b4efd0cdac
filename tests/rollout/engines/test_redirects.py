"""The HTTP clients follow no redirect: a server on loopback that answers ``307`` to another host
(``localhost`` instead of ``127.0.0.1``, where a second real server listens) gets a clear error back,
and the other host never sees the prompt, its images or the API key. Clients: SGLang's and vLLM's
engines (:class:`~vlm_envs.rollout.engines.HttpEngine`), eval's OpenAI chat client and its
reachability probe, :class:`~vlm_envs.remote.RemoteEnv`'s WebSocket and the TRL rollout's vLLM engine
(TRL's ``requests`` session)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import aiohttp
import pytest
import trl.generation.vllm_client as vllm_client_module
from aiohttp import web
from websockets.sync.client import connect

from vlm_envs.eval.openai_chat import ChatError, OpenAIChatClient
from vlm_envs.eval.reachable import unreachable
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.rollout.engines.contract import PermanentEngineError
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine
from vlm_envs.rollout.trl import VLLMSampling, VLLMServerEngine


class Servers:
    """Two real aiohttp servers on loopback: ``redirecting`` answers every request 307 to the same
    path on ``other`` (named ``localhost``: another host), which records what reaches it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.runners: list[web.AppRunner] = []
        self.other_url = self.redirecting_url = ""

    async def start(self) -> None:
        other = web.Application()
        other.router.add_route("*", "/{tail:.*}", self._record)
        self.other_url = await self._serve(other, "localhost")
        redirecting = web.Application()
        redirecting.router.add_route("*", "/{tail:.*}", self._redirect)
        self.redirecting_url = await self._serve(redirecting, "127.0.0.1")

    async def _serve(self, app: web.Application, host: str) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]
        return f"http://{host}:{port}"

    async def _redirect(self, request: web.Request) -> web.Response:
        scheme = "ws" if request.path == "/ws" else "http"  # a WebSocket handshake goes to ws://
        raise web.HTTPTemporaryRedirect(self.other_url.replace("http", scheme, 1) + request.path)

    async def _record(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path, dict(request.headers)))
        return web.json_response({"ok": True, "data": [{"id": "m"}]})  # "data": what TRL's client reads

    async def stop(self) -> None:
        for runner in self.runners:
            await runner.cleanup()


@pytest.fixture
def servers() -> Iterator[Servers]:
    """The two servers on their own event loop in a thread (each test's clients run on theirs)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    s = Servers()
    asyncio.run_coroutine_threadsafe(s.start(), loop).result(30)
    yield s
    asyncio.run_coroutine_threadsafe(s.stop(), loop).result(30)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_the_servers_redirect_for_real(servers) -> None:
    """The control: a client that follows redirects reaches the other host."""

    async def follow() -> int:
        url = servers.redirecting_url + "/generate"
        async with aiohttp.ClientSession() as session, session.post(url, data="{}") as resp:
            return resp.status

    assert asyncio.run(follow()) == 200 and servers.seen[0][:2] == ("POST", "/generate")


@pytest.mark.parametrize("engine_cls", [SGLangEngine, VLLMEngine])
def test_an_engine_refuses_a_redirect_and_names_it(servers, engine_cls) -> None:
    kwargs = {"image_token_id": 5} if engine_cls is VLLMEngine else {}

    async def one() -> None:
        async with engine_cls(servers.redirecting_url, max_retries=3, backoff=0.01, **kwargs) as engine:
            await engine.generate([1, 2, 3], [], {"max_new_tokens": 4})

    with pytest.raises(
        PermanentEngineError, match=r"answered HTTP 307.*a redirect to 'http://localhost:.*follows none"
    ):
        asyncio.run(one())
    assert servers.seen == []


def test_the_openai_client_keeps_its_prompt_and_key_on_the_named_host(servers) -> None:
    async def one() -> None:
        client = OpenAIChatClient(servers.redirecting_url + "/v1", "m", api_key="secret", max_retries=2)
        try:
            await client.check_reachable(timeout=5)  # a redirect is an answer: reachable
            await client.complete([{"role": "user", "content": "hi"}], {"max_tokens": 4})
        finally:
            await client.close()

    with pytest.raises(ChatError, match=r"answered HTTP 307.*follows none"):
        asyncio.run(one())
    assert servers.seen == []


def test_the_reachability_probe_does_not_follow(servers) -> None:
    async def probe() -> str | None:
        async with aiohttp.ClientSession() as session:
            return await unreachable(session, servers.redirecting_url + "/health", 5)

    assert asyncio.run(probe()) is None and servers.seen == []


def test_remote_env_refuses_a_redirect_that_websockets_would_follow(servers) -> None:
    ws = servers.redirecting_url.replace("http://", "ws://") + "/ws"
    with pytest.raises(Exception, match="200"):  # the control: websockets' own client goes to the other host
        connect(ws, open_timeout=5)
    assert [path for _, path, _ in servers.seen] == ["/ws"]
    servers.seen.clear()
    env = RemoteEnv(servers.redirecting_url, "sokoban", token="secret")
    with pytest.raises(RemoteEnvError, match=r"HTTP 307.*a redirect to 'ws://localhost:.*follows none"):
        env.reset(0)
    assert servers.seen == []


def test_the_trl_vllm_engine_refuses_a_redirect(servers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_client_module, "is_vllm_available", lambda *a, **k: True)  # its import guard
    client = vllm_client_module.VLLMClient(base_url=servers.redirecting_url, connection_timeout=10)
    servers.seen.clear()  # TRL's own health check may follow (the session is TRL's); our turns do not
    engine = VLLMServerEngine(client, VLLMSampling(), None, read_timeout=5, turn_timeout=30)
    try:
        with pytest.raises(
            PermanentEngineError, match=r"answered HTTP 307.*'http://localhost:.*follows none"
        ):
            engine._bounded([1, 2, 3], [], {"max_new_tokens": 4})
    finally:
        engine.close()
    assert servers.seen == []
