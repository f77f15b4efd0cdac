"""Offline test doubles that are real parts: a tiny Qwen-VL processor and model, an SGLang-style
server, and a scripted engine for overhead measurements.

Needs the ``rollout`` extra (torch, transformers, aiohttp); nothing here touches the network.
"""

from vlm_envs.testing.generation import Generation, ModelInputs, SamplingParams, TinyEngine
from vlm_envs.testing.models import (
    TinySize,
    build_tiny_processor,
    build_tiny_qwen2_vl,
    build_tiny_qwen3_vl,
    save_tiny_model,
    save_tiny_processor,
)
from vlm_envs.testing.scripted import ScriptedEngine
from vlm_envs.testing.server import Fault, ServerProcess, SGLangTestServer, build_test_engine
from vlm_envs.testing.templates import DEFAULT_SYSTEM_PROMPT, QWEN2_VL_TEMPLATE, QWEN3_VL_TEMPLATE
from vlm_envs.testing.tokenizer import build_tiny_tokenizer

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "QWEN2_VL_TEMPLATE",
    "QWEN3_VL_TEMPLATE",
    "Fault",
    "Generation",
    "ModelInputs",
    "SGLangTestServer",
    "SamplingParams",
    "ScriptedEngine",
    "ServerProcess",
    "TinyEngine",
    "TinySize",
    "build_test_engine",
    "build_tiny_processor",
    "build_tiny_qwen2_vl",
    "build_tiny_qwen3_vl",
    "build_tiny_tokenizer",
    "save_tiny_model",
    "save_tiny_processor",
]
