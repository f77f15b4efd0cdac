"""Repeated ``--base-url``: a run's model requests spread over several servers by requests in flight,
every server checked at start, and the two ways of naming servers kept apart."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from vlm_envs.cli import main
from vlm_envs.eval.balance import LeastInFlight
from vlm_envs.testing import Fault, SGLangTestServer, build_tiny_tokenizer
from vlm_envs.testing.generation import TinyEngine


def test_the_least_busy_url_is_lent_ties_in_order() -> None:
    pool = LeastInFlight(["a", "b", "c"], ["A", "B", "C"])
    with pool.lend() as first, pool.lend() as second, pool.lend() as third:
        assert (first, second, third) == ("A", "B", "C")
        with pool.lend() as fourth:
            assert fourth == "A" and pool.in_flight == [2, 1, 1]
    assert pool.in_flight == [0, 0, 0]
    with pool.lend() as again:
        assert again == "A"
    with pytest.raises(ValueError, match="one client per URL"):
        LeastInFlight(["a"], [])


@pytest.fixture(scope="module")
def two_servers(tiny_engine: TinyEngine) -> Iterator[tuple[SGLangTestServer, SGLangTestServer]]:
    with SGLangTestServer(tiny_engine) as a, SGLangTestServer(tiny_engine) as b:
        yield a, b


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tokenizer")
    build_tiny_tokenizer().save_pretrained(path)
    return str(path)


def _argv(tokenizer_dir: str, out: Path, *flags: str) -> list[str]:
    common = ["--tokenizer", tokenizer_dir, "--max-turns", "2", "--max-tokens", "6"]
    return ["eval", "sokoban", *flags, *common, "--config", "render_mode=text", "--out", str(out), "--quiet"]


def _dead_url() -> str:
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_an_eval_over_two_urls_sends_requests_to_both(
    two_servers: tuple[SGLangTestServer, SGLangTestServer],
    tokenizer_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = two_servers
    for server in (a, b):
        server.requests.clear()
        server.inject(Fault("delay", seconds=2.0))  # the first request to each is still in flight...
    out = tmp_path / "run"
    urls = ["--base-url", a.url, "--base-url", b.url]
    argv = _argv(tokenizer_dir, out, "--policy", "sglang", *urls, "-n", "4", "--concurrency", "4")
    assert main(argv) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["episode"] for r in records) == [0, 1, 2, 3]
    assert all(r["status"] in ("completed", "truncated") for r in records), [r["error"] for r in records]
    replies = sum(r["num_turns"] for r in records)
    # ...so the second goes to the other server: both serve, and every reply was asked of one of them
    assert len(a.requests) >= 1 and len(b.requests) >= 1
    assert len(a.requests) + len(b.requests) == replies
    assert all(r["policy"] == f"sglang:{a.url},{b.url}" for r in records)
    run = json.loads((out / "run.json").read_text())
    assert run["base_urls"] == [a.url, b.url] and run["policy"] == "sglang"

    # a resume must name the same servers
    capsys.readouterr()
    assert main([*_argv(tokenizer_dir, out, "--policy", "sglang", "--base-url", a.url), "--resume"]) == 2
    assert "base_urls differ" in capsys.readouterr().err


def test_a_dead_url_fails_the_start_naming_it(
    two_servers: tuple[SGLangTestServer, SGLangTestServer],
    tokenizer_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, _ = two_servers
    dead = _dead_url()
    out = tmp_path / "dead"
    argv = _argv(tokenizer_dir, out, "--policy", "sglang", "--base-url", a.url, "--base-url", dead, "-n", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("vlm-envs: error: cannot reach " + dead)
    assert not (out / "results.jsonl").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--policy", "sglang:http://127.0.0.1:9", "--base-url", "http://127.0.0.1:8"],
            "give --policy sglang",
        ),
        (["--policy", "openai"], "--policy openai needs its server"),
        (["--policy", "oracle", "--base-url", "http://127.0.0.1:8"], "uses no server"),
        (["--policy", "oracle", "--actors", "2"], "give them with --ray"),
    ],
)
def test_conflicting_or_missing_server_options_are_usage_errors(
    flags: list[str], message: str, tokenizer_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(tokenizer_dir, tmp_path / "out", *flags, "-n", "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


class SlowChatServer:
    """``/v1/chat/completions`` answering ``<answer>Up</answer>`` after a pause (requests overlap)."""

    def __init__(self) -> None:
        self.requests = 0
        self.loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        app.router.add_get("/v1/models", lambda r: web.json_response({"data": []}))
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        self.loop.run_until_complete(web.SockSite(self.runner, sock).start())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _complete(self, request: web.Request) -> web.Response:
        self.requests += 1
        await asyncio.sleep(2.0)
        message = {"role": "assistant", "content": "<answer>Up</answer>"}
        return web.json_response({"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]})

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def test_the_openai_policy_balances_over_its_urls_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    servers = [SlowChatServer(), SlowChatServer()]
    try:
        urls = [flag for s in servers for flag in ("--base-url", s.url)]
        out = tmp_path / "openai"
        argv = [
            "eval",
            "sokoban",
            "--policy",
            "openai",
            *urls,
            "--model",
            "m",
            "-n",
            "4",
            "--concurrency",
            "4",
        ]
        argv += ["--max-turns", "1", "--out", str(out), "--quiet"]
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        for server in servers:
            server.stop()
    assert [s.requests for s in servers] == [2, 2]  # four at once: two in flight on each
