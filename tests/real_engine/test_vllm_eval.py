"""``vlm-envs eval`` against a real vLLM: the OpenAI chat route and the token-in/token-out route."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vlm_envs.cli import main

pytestmark = pytest.mark.timeout(1800)  # the first test waits for the venv build and vLLM's startup

EPISODES, TURNS = 2, 2


@pytest.mark.parametrize("env", ["sokoban", "geo3k"])
@pytest.mark.parametrize("route", ["openai", "vllm"])
def test_eval_records_every_turn(
    route: str, env: str, vllm_url: str, model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    served = ["--model", str(model_dir)] if route == "openai" else ["--tokenizer", str(model_dir)]
    base = f"{vllm_url}/v1" if route == "openai" else vllm_url  # an OpenAI base URL ends in /v1
    argv = ["eval", env, "--policy", f"{route}:{base}", *served, "-n", str(EPISODES)]
    argv += ["--max-turns", str(TURNS), "--max-tokens", "12", "--out", str(out), "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["seed"] for r in records) == list(range(EPISODES))
    for record in records:
        assert record["status"] in ("completed", "truncated"), record["error"]
        replies = record["turns"][1:]  # turn 0 is the first observation
        assert 1 <= len(replies) <= TURNS
        assert all(t["model_text"] is not None and t["observation"] is not None for t in replies)
        if env == "sokoban":  # a picture of the board every turn, saved beside the records
            assert all(t["observation"]["images"] for t in record["turns"])
            assert all((out / p).exists() for t in record["turns"] for p in t["observation"]["images"])
    assert (out / "index.html").exists()
