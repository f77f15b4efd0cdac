"""Stand-in for ``slime.rollout.sglang_rollout``: ``GenerateState`` (a per-process singleton holding
the tokenizer, the processor, the default sampling params and the ``aborted`` flag) and
``generate_and_rm`` (how slime calls a custom generate function and rewards what it returns).

The real one loads the processor from ``args.hf_checkpoint``; a Qwen-VL processor cannot be loaded
from disk here (it needs torchvision), so this one builds the tiny offline processor instead.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from vlm_envs.testing import build_tiny_processor


class GenerateState:
    _instance: GenerateState | None = None

    def __new__(cls, args: Any) -> GenerateState:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._init(args)
        return cls._instance

    def _init(self, args: Any) -> None:
        self.args = args
        self.processor = build_tiny_processor(getattr(args, "tiny_family", "qwen2_vl"))
        self.tokenizer = self.processor.tokenizer
        self.sampling_params: dict[str, Any] = dict(
            temperature=args.rollout_temperature,
            top_p=1.0,
            top_k=-1,
            max_new_tokens=args.rollout_max_response_len,
            stop=None,
            stop_token_ids=None,
            skip_special_tokens=False,
            no_stop_trim=True,
            spaces_between_special_tokens=False,
        )
        self.reset()

    def reset(self) -> None:
        self.remaining_batch_size = 0
        self.pendings: set = set()
        self.aborted = False

    @classmethod
    def forget(cls) -> None:
        """Test helper: drop the singleton (the real one lives as long as the rollout process)."""
        cls._instance = None


def load_function(path: str) -> Any:
    """Stand-in for ``slime.utils.misc.load_function``: ``"pkg.module.name"`` -> the object."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


async def async_rm(args: Any, sample: Any) -> Any:
    """Stand-in for ``slime.rollout.rm_hub.async_rm`` with ``--custom-rm-path`` (the only RM here)."""
    return await load_function(args.custom_rm_path)(args, sample)


async def generate_and_rm(args: Any, sample: Any, sampling_params: dict, evaluation: bool = False) -> Any:
    """Stand-in for ``slime.rollout.sglang_rollout.generate_and_rm`` as it treats a custom generate
    function: called with ``evaluation`` when it takes it; a returned list is a fan-out whose samples
    are returned untouched if any is ABORTED, and otherwise get the RM's reward where theirs is None."""
    state = GenerateState(args)
    if state.aborted:
        sample.status = sample.Status.ABORTED
        return sample
    generate = load_function(args.custom_generate_function_path)
    if "evaluation" in inspect.signature(generate).parameters:
        sample = await generate(args, sample, sampling_params, evaluation=evaluation)
    else:
        sample = await generate(args, sample, sampling_params)
    samples = sample if isinstance(sample, list) else [sample]
    if any(s.status == s.Status.ABORTED for s in samples):
        return sample
    for s in samples:
        if s.reward is None:
            s.reward = await async_rm(args, s)
    return sample
