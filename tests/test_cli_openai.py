"""``vlm-envs eval --policy openai:URL`` against a real OpenAI-compatible server process.

The server is transformers' own ``transformers serve`` (extra ``transformers[serving]``) on a tiny
random ``Qwen2ForCausalLM`` with the tiny tokenizer of :mod:`vlm_envs.testing`, saved to a temporary
folder and served offline (``HF_HUB_OFFLINE=1``). It is a text model: it accepts the image parts
(data URIs) and ignores them, which is all this end-to-end test needs; the exact message shapes are
checked against a recording server in ``tests/eval/test_openai_chat.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from vlm_envs.cli import main
from vlm_envs.testing.server import stop_process

pytest.importorskip("fastapi", reason="transformers serve needs the transformers[serving] extra")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _save_tiny_text_model(path: Path) -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from vlm_envs.testing import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.fixture(scope="module")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    model_dir = tmp_path_factory.mktemp("tiny-text-model")
    _save_tiny_text_model(model_dir)
    port = _free_port()
    serve = shutil.which("transformers", path=str(Path(sys.executable).parent)) or "transformers"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [serve, "serve", str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited: {proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                pytest.fail("transformers serve did not answer /health within 90 s")
            time.sleep(0.3)
        yield base + "/v1", str(model_dir)
    finally:
        stop_process(proc, grace_s=15)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.slow
def test_openai_policy_plays_sokoban_against_transformers_serve(
    served_model: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, model = served_model
    out = tmp_path / "run"
    argv = ["eval", "sokoban", "--policy", f"openai:{url}", "--model", model, "-n", "2", "--max-turns", "2"]
    argv += ["--max-tokens", "8", "--concurrency", "2", "--out", str(out), "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["episode"] for r in records) == [0, 1]
    for r in records:
        assert r["status"] in ("completed", "truncated"), r["error"]
        assert r["policy"] == f"openai:{url}"
        replies = r["turns"][1:]
        assert 1 <= len(replies) <= 2
        for turn in replies:
            assert isinstance(turn["model_text"], str)
            assert 1 <= turn["generated_tokens"] <= 8  # the server's usage, capped by --max-tokens
            assert "format_valid" in turn["metrics"]  # the real env judged the text
        assert r["tokens"] > r["generated_tokens"] > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == 2 and summary["mean_tokens"] > 0


@pytest.mark.slow
def test_openai_policy_failed_requests_end_episodes_not_the_run(
    served_model: tuple[str, str], tmp_path: Path
) -> None:
    url, _ = served_model
    out = tmp_path / "run"
    # a model the server does not serve: it answers HTTP 400 (no retry), and each episode ends as failed
    argv = ["eval", "sokoban", "--policy", f"openai:{url}", "--model", str(tmp_path / "no-model"), "-n", "2"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 1  # every episode failed: the run measured nothing
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    assert all(r["status"] == "failed" and r["error"].startswith("policy: ") for r in records)
    assert all(r["reward"] == 0.0 for r in records)
