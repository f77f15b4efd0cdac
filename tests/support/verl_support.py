"""What surrounds verl's agent loop, on CPU and without Ray: verl's own Hydra config, a scripted
server manager, and an ``AgentLoopWorker`` made the way verl's ``*_on_cpu.py`` tests make one."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import verl
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from verl.experimental.agent_loop import agent_loop
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from vlm_envs.rollout import contract
from vlm_envs.testing import ScriptedEngine

CONFIG_DIR = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")


#: What verl's worker passes an agent loop for one sample: its trajectory info and sampling params.
TRAJECTORY = {"step": 0, "sample_index": 0, "rollout_n": 0, "validate": False}
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": False}


def verl_config(overrides: Sequence[str] = (), name: str = "ppo_trainer") -> DictConfig:
    """verl's own trainer config with ``overrides`` (Hydra raises on an unknown key)."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name=name, overrides=list(overrides))


class ScriptedServerManager:
    """verl's server manager answering from a :class:`ScriptedEngine` (as verl's servers do: log probs
    only when ``sampling_params["logprobs"]``), recording every request."""

    def __init__(self, engine: ScriptedEngine, stop_reason: str | None = "completed") -> None:
        self.engine = engine
        self.stop_reason = stop_reason
        self.requests: list[dict[str, Any]] = []

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data=None,
        **kw,
    ) -> TokenOutput:
        images = list(image_data or [])
        self.requests.append(
            {
                "request_id": request_id,
                "prompt_ids": list(prompt_ids),
                "params": dict(sampling_params),
                "images": images,
            }
        )
        out = await self.engine.generate(prompt_ids, images, sampling_params)
        log_probs = out.log_probs if sampling_params.get("logprobs") else None
        return TokenOutput(token_ids=out.token_ids, log_probs=log_probs, stop_reason=self.stop_reason)


class RaisingServerManager:
    """A server manager whose every request fails."""

    async def generate(self, request_id: str, **kwargs: Any) -> TokenOutput:
        raise RuntimeError("the inference server went away")


def agent_loop_worker(config: DictConfig, server_manager: Any, processor: Any) -> agent_loop.AgentLoopWorker:
    """verl's ``AgentLoopWorker`` without Ray, its models or its tools."""
    worker = object.__new__(agent_loop.AgentLoopWorker)
    worker.config = config
    worker.llm_client = server_manager
    worker.teacher_client = None
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.rollout_config = config.actor_rollout_ref.rollout
    worker.tokenizer = processor.tokenizer
    worker.processor = processor
    worker.hf_model_type = None
    worker.dataset_cls = RLHFDataset
    worker.tools = []
    worker.mm_processor_kwargs = {}
    return worker


def no_rollout_trace(**kwargs: Any) -> contextlib.AbstractContextManager:
    """Stands in for verl's ``rollout_trace_attr`` (its tracing backends are not set up here)."""
    return contextlib.nullcontext()


def assert_verl_contract(out: Any, codec: Any, prompt_length: int) -> None:
    """The suite's one Sample contract (:mod:`vlm_envs.rollout.contract`) on what verl's worker made
    of our output (``_InternalAgentLoopOutput``: padded ids, mask and log probs, and the image tensors of
    its own processor call), the padding taken off."""
    prompt = out.prompt_ids[0][out.attention_mask[0, :prompt_length].bool()].tolist()
    n = int(out.attention_mask[0, prompt_length:].sum())
    inputs = out.multi_modal_inputs or {}
    grids = inputs["image_grid_thw"].tolist() if "image_grid_thw" in inputs else []
    pixels = inputs.get("pixel_values")
    violations = contract.token_violations(
        prompt,
        out.response_ids[0, :n].tolist(),
        out.response_mask[0, :n].tolist(),
        out.response_logprobs[0, :n].tolist(),
        grids,
        None if pixels is None else int(pixels.shape[0]),
        contract.TokenSpace.of(codec),
    )
    assert violations == []
