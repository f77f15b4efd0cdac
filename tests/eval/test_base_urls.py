"""Repeated ``--base-url``: a run's model requests spread over several servers by requests in flight,
every server checked at start, and the two ways of naming servers kept apart."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

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
