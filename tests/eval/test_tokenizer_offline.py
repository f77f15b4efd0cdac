"""``--policy sglang:URL --tokenizer NAME`` with no network: one error line in seconds, not minutes.

Each run is a subprocess with an empty Hugging Face cache and ``HF_ENDPOINT`` on loopback: a port
that refuses connections, or a socket that accepts and never answers (a network that swallows
packets). ``huggingface_hub`` alone retried such a name for minutes; the timeout marker bounds
the whole run far below that.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from transformers import Qwen2Config

from vlm_envs.testing import build_tiny_tokenizer

NAME = "some-org/some-model"


@pytest.fixture
def silent_endpoint() -> Iterator[str]:
    """A loopback address that completes TCP connections and never sends a byte."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def _refused_endpoint() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _env(tmp_path: Path, endpoint: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    return {**env, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": endpoint, **extra}


def _eval(tmp_path: Path, tokenizer: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    server = _refused_endpoint()  # the tokenizer is loaded before the server is asked anything
    cmd = [sys.executable, "-m", "vlm_envs.cli", "eval", "sokoban", "--policy", f"sglang:{server}"]
    cmd += ["--tokenizer", tokenizer, "-n", "1", "--out", str(tmp_path / "out"), "--quiet"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("vlm-envs: error: ")
    return err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("hub", ["refused", "silent"])
def test_unreachable_hub_fails_in_seconds_naming_the_tokenizer_and_a_local_folder(
    tmp_path: Path, silent_endpoint: str, hub: str
) -> None:
    endpoint = _refused_endpoint() if hub == "refused" else silent_endpoint
    err = _one_line(_eval(tmp_path, NAME, _env(tmp_path, endpoint)))
    assert (
        f"cannot load tokenizer {NAME!r}" in err and "not a local folder nor in the Hugging Face cache" in err
    )
    assert f"the hub at {endpoint} cannot be reached" in err
    assert "pass --tokenizer /path/to/folder" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(60)
def test_hf_hub_offline_fails_at_once_without_asking_the_hub(tmp_path: Path, silent_endpoint: str) -> None:
    err = _one_line(_eval(tmp_path, NAME, _env(tmp_path, silent_endpoint, HF_HUB_OFFLINE="1")))
    assert f"cannot load tokenizer {NAME!r}" in err and "HF_HUB_OFFLINE is set" in err


@pytest.mark.timeout(60)
def test_a_missing_local_folder_is_named_as_a_folder(tmp_path: Path, silent_endpoint: str) -> None:
    missing = str(tmp_path / "models" / "qwen")
    err = _one_line(_eval(tmp_path, missing, _env(tmp_path, silent_endpoint)))
    assert f"tokenizer folder {missing!r} does not exist" in err


@pytest.mark.timeout(60)
def test_a_hub_name_in_the_local_cache_loads_with_no_hub(tmp_path: Path) -> None:
    snapshot = "0" * 40
    repo = tmp_path / "hf" / "hub" / "models--some-org--tiny"
    tokenizer = build_tiny_tokenizer()
    tokenizer.save_pretrained(repo / "snapshots" / snapshot)  # as a download of the served model leaves it
    Qwen2Config(vocab_size=len(tokenizer)).save_pretrained(repo / "snapshots" / snapshot)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snapshot)
    code = (
        "from vlm_envs.rollout.processors import load_processor\n"
        "tok = load_processor('some-org/tiny'); print(type(tok).__name__, len(tok))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(tmp_path, _refused_endpoint()),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == str(len(tokenizer))
