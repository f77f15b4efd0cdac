"""``--policy sglang:URL``: episodes through the rollout's ``run_episode`` against the SGLang test server.

Three ways in: the command line with ``--tokenizer`` naming a text-only tokenizer saved to disk
(Sokoban in text mode), or the tiny processor saved by ``save_tiny_processor`` (a vision env; the
folder loads without torchvision), and the Python entry ``run_eval(..., policy=SGLangPolicy(...))``
with the tiny processor object. All use the in-process test server of vlm_envs.testing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from vlm_envs import build_env
from vlm_envs.cli import main
from vlm_envs.eval import EvalConfig, PolicyOptions, run_eval
from vlm_envs.eval.sglang_policy import SGLangPolicy
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.testing import Fault, SGLangTestServer, build_tiny_tokenizer, save_tiny_processor


def test_cli_sglang_policy_matches_run_episode_token_for_token(
    sglang_server: SGLangTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokenizer_dir = tmp_path / "tokenizer"
    build_tiny_tokenizer().save_pretrained(tokenizer_dir)
    out = tmp_path / "run"
    sglang_server.requests.clear()
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", str(tokenizer_dir)]
    argv += [
        "-n",
        "1",
        "--seed",
        "3",
        "--max-turns",
        "2",
        "--max-tokens",
        "12",
        "--config",
        "render_mode=text",
    ]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0, capsys.readouterr().err
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] in ("completed", "truncated"), record["error"]
    replies = record["turns"][1:]
    assert len(replies) == len(sglang_server.requests) >= 1
    last_request = sglang_server.requests[-1]
    assert "image_data" not in last_request or last_request["image_data"] == 0
    assert record["tokens"] == len(last_request["input_ids"]) + replies[-1]["generated_tokens"]
    assert all(1 <= t["generated_tokens"] <= 12 for t in replies)

    # the training loop on the same env, seed and server produces the same turns
    env = build_env("sokoban", render_mode="text", max_turns=2)
    codec = ChatCodec(build_tiny_tokenizer())
    config = EpisodeConfig(max_turns=2, max_new_tokens=12)

    async def train_side():  # type: ignore[no-untyped-def]
        async with SGLangEngine(sglang_server.url) as engine:
            return await run_episode(
                env, engine, codec, seed=3, config=config, sampling_params={"temperature": 0.0}
            )

    traj = asyncio.run(train_side())
    assert [t.model_text for t in traj.turns] == [t["model_text"] for t in replies]
    assert len(traj.tokens) == record["tokens"]
    assert traj.status.value == record["status"]


def test_python_entry_sglang_policy_with_the_tiny_processor_sends_images(
    sglang_server: SGLangTestServer, tmp_path: Path
) -> None:
    processor = sglang_server.engine.processor
    options = PolicyOptions(tokenizer=processor, max_tokens=8)
    out = tmp_path / "vision"
    sglang_server.requests.clear()
    config = EvalConfig(
        env="sokoban", policy=f"sglang:{sglang_server.url}", n=2, out=out, max_turns=2, options=options
    )
    summary = run_eval(config, policy=SGLangPolicy(sglang_server.url, options))
    assert summary["episodes"] == 2
    assert summary["mean_tokens"] > summary["mean_generated_tokens"] > 0
    assert sglang_server.requests and all(r["image_data"] >= 1 for r in sglang_server.requests)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for r in records:
        assert r["status"] in ("completed", "truncated"), r["error"]
        assert (out / r["turns"][0]["observation"]["images"][0]).is_file()


def test_cli_turn_and_read_timeouts_reach_the_engine(
    sglang_server: SGLangTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokenizer_dir = tmp_path / "tokenizer"
    build_tiny_tokenizer().save_pretrained(tokenizer_dir)
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", str(tokenizer_dir)]
    argv += ["-n", "1", "--max-turns", "1", "--max-tokens", "4", "--config", "render_mode=text", "--quiet"]
    cases = [
        (Fault("delay", seconds=5.0), ["--turn-timeout", "1"], "no complete reply within turn_timeout=1 s"),
        (
            Fault("stall", seconds=5.0),
            ["--read-timeout", "0.3", "--turn-timeout", "30"],
            "no progress for read_timeout=0.3 s",
        ),
    ]
    for i, (fault, flags, error) in enumerate(cases):
        sglang_server.clear_faults()
        sglang_server.inject(fault, times=5)
        out = tmp_path / f"run{i}"
        main([*argv, *flags, "--out", str(out)])
        sglang_server.clear_faults()
        (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert record["status"] == "failed" and error in record["error"], record["error"]
    capsys.readouterr()
    assert main([*argv, "--read-timeout", "0", "--out", str(tmp_path / "bad")]) == 2
    assert "read_timeout must be a positive number of seconds" in capsys.readouterr().err


def test_eval_under_a_windowed_history_records_each_turns_context(
    sglang_server: SGLangTestServer, tmp_path: Path
) -> None:
    processor = sglang_server.engine.processor
    options = PolicyOptions(tokenizer=processor, max_tokens=8, history="window:1")
    out = tmp_path / "windowed"
    sglang_server.requests.clear()
    config = EvalConfig(
        env="sokoban", policy=f"sglang:{sglang_server.url}", n=1, out=out, max_turns=4, options=options
    )
    run_eval(config, policy=SGLangPolicy(sglang_server.url, options))
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    contexts = [t["context_turns"] for t in record["turns"][1:]]
    assert contexts == [[], [1], [2], [3]][: len(contexts)] and len(contexts) >= 2, record["error"]
    # every request after the first holds the task's frame and one kept frame: two images
    assert [r["image_data"] for r in sglang_server.requests] == [1] + [2] * (len(contexts) - 1)
    assert "the model saw: the task" in (out / "index.html").read_text()


@pytest.mark.parametrize(
    ("policy", "history", "message"),
    [
        ("sglang:http://127.0.0.1:1", "last:2", "--history: history must be"),
        ("oracle", "window:1", "sglang:URL and vllm:URL only"),
    ],
)
def test_a_bad_history_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, history: str, message: str
) -> None:
    argv = ["eval", "sokoban", "--policy", policy, "--history", history, "--tokenizer", str(tmp_path)]
    assert main([*argv, "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_cli_sglang_with_a_saved_processor_folder_sends_images(
    sglang_server: SGLangTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = save_tiny_processor(tmp_path / "processor")  # what the test server's model was built with
    out = tmp_path / "run"
    sglang_server.requests.clear()
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", str(folder)]
    argv += ["-n", "1", "--max-turns", "2", "--max-tokens", "8", "--out", str(out), "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] in ("completed", "truncated"), record["error"]
    assert sglang_server.requests and all(r["image_data"] >= 1 for r in sglang_server.requests)


def test_a_tokenizer_without_an_image_processor_is_refused_for_an_image_env(
    sglang_server: SGLangTestServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tokenizer_dir = tmp_path / "tokenizer"
    build_tiny_tokenizer().save_pretrained(tokenizer_dir)
    out = tmp_path / "run"
    argv = ["eval", "sokoban", "--policy", f"sglang:{sglang_server.url}", "--tokenizer", str(tokenizer_dir)]
    assert main([*argv, "-n", "2", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("vlm-envs: error: ")
    assert f"--tokenizer {str(tokenizer_dir)!r} holds no image processor" in err and "sokoban" in err
    assert not out.exists()
