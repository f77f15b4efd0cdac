"""What ``vlm_envs.rollout`` exports: every engine client a user may construct, beside the episode core."""

from __future__ import annotations

import vlm_envs.rollout as rollout
from vlm_envs.rollout.engines.http import HttpEngine
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.engines.vllm import VLLMEngine


def test_both_engine_clients_are_exported() -> None:
    assert rollout.VLLMEngine is VLLMEngine and rollout.SGLangEngine is SGLangEngine
    assert {"VLLMEngine", "SGLangEngine"} <= set(rollout.__all__)
    assert all(issubclass(cls, HttpEngine) for cls in (rollout.VLLMEngine, rollout.SGLangEngine))
    assert all(hasattr(rollout, name) for name in rollout.__all__)
