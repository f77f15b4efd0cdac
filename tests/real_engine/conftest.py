"""The real-engine tier: vLLM on the CPU serves a tiny Qwen2-VL built in code, once per test session.

The vLLM venv is built on first use and cached (:mod:`vlm_envs.testing.vllm_cpu`). Where vLLM cannot
be built or started, every test of the tier fails under CI with the reason and is skipped with it
locally.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from vlm_envs.testing import TinySize, save_tiny_model
from vlm_envs.testing.vllm_cpu import VLLMServer, VLLMUnavailable

#: vLLM's CPU attention needs head_dim >= 32 (FACTS.md): hidden 64 with 2 heads.
SIZE = TinySize(head_dim=32)


@pytest.fixture(scope="package")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen2-VL with its processor, saved where vLLM and transformers load it offline."""
    return save_tiny_model(tmp_path_factory.mktemp("tiny-qwen2-vl"), "qwen2_vl", SIZE, seed=0)


@pytest.fixture(scope="package")
def vllm_url(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A vLLM server on 127.0.0.1 serving :func:`model_dir`, up until the tier's last test has run."""
    server = VLLMServer(model_dir, tmp_path_factory.mktemp("vllm") / "server.log")
    try:
        server.start()
    except VLLMUnavailable as err:
        line = f"real-engine tier: {err}"
        if os.environ.get("CI"):
            pytest.fail(line, pytrace=False)
        pytest.skip(line)
    try:
        yield server.url
    finally:
        server.stop()
