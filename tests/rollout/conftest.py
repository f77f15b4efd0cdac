"""The rollout tests' served model: the shared test server with a codec for its processor."""

from __future__ import annotations

import pytest

from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.testing import SGLangTestServer, TinyEngine


@pytest.fixture(scope="module")
def served(sglang_server: SGLangTestServer, tiny_engine: TinyEngine) -> tuple[SGLangTestServer, ChatCodec]:
    return sglang_server, ChatCodec(tiny_engine.processor)
