"""Inference engines: token ids and images in; token ids, log probs and a finish reason out.

:mod:`~vlm_envs.rollout.engines.contract` states what an engine is and what its replies must be;
:mod:`~vlm_envs.rollout.engines.http` is the bounded HTTP transport that
:class:`~vlm_envs.rollout.engines.sglang.SGLangEngine` and
:class:`~vlm_envs.rollout.engines.vllm.VLLMEngine` speak; :mod:`~vlm_envs.rollout.engines.hf_model`
runs a transformers model in this process.
"""

from vlm_envs.rollout.engines.contract import (
    Engine,
    EngineContractError,
    EngineError,
    EngineOutput,
    EngineTimeout,
    PermanentEngineError,
    ReplyContract,
    TransientEngineError,
    engine_name,
)
from vlm_envs.rollout.engines.http import HttpEngine, deadline
from vlm_envs.rollout.engines.sglang import SGLangEngine

__all__ = [
    "Engine",
    "EngineContractError",
    "EngineError",
    "EngineOutput",
    "EngineTimeout",
    "HttpEngine",
    "PermanentEngineError",
    "ReplyContract",
    "SGLangEngine",
    "TransientEngineError",
    "deadline",
    "engine_name",
]
