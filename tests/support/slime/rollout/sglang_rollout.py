"""Stand-in for ``slime.rollout.sglang_rollout``: ``GenerateState`` (a per-process singleton holding
the tokenizer, the processor, the default sampling params, the pending group tasks and the ``aborted``
flag), ``generate_and_rm`` (how slime calls a custom generate function and rewards what it returns),
``generate_and_rm_group`` and ``abort`` (how slime ends a rollout: with ``--partial-rollout``, the
groups still running come back for its data buffer, which hands them to ``generate_and_rm`` again).

The real one loads the processor from ``args.hf_checkpoint``; a Qwen-VL processor cannot be loaded
from disk here (it needs torchvision), so this one builds the tiny offline processor instead.
"""

from __future__ import annotations

import asyncio
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
    function, in its order: with ``partial_rollout`` and ``mask_offpolicy_in_partial_rollout``, a sample
    that has a response gets ``loss_mask = [0] * response_length``; a COMPLETED or TRUNCATED one is
    returned untouched; with the ``aborted`` flag set, the sample is marked ABORTED unplayed; else the
    function is called (with ``evaluation`` when it takes it); a returned list is a fan-out whose samples
    are returned untouched if any is ABORTED, and otherwise get the RM's reward where theirs is None."""
    partial = getattr(args, "partial_rollout", False)
    if partial and getattr(args, "mask_offpolicy_in_partial_rollout", False) and sample.response_length > 0:
        sample.loss_mask = [0] * sample.response_length
    if sample.status in (sample.Status.COMPLETED, sample.Status.TRUNCATED):
        assert sample.response is not None and sample.reward is not None
        return sample
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


async def generate_and_rm_group(
    args: Any, group: list, sampling_params: dict, evaluation: bool = False
) -> list:
    """Stand-in for ``generate_and_rm_group``: the group's samples at once (nothing once aborted)."""
    if GenerateState(args).aborted:
        return group
    tasks = [generate_and_rm(args, sample, dict(sampling_params), evaluation=evaluation) for sample in group]
    return list(await asyncio.gather(*tasks))


async def abort(args: Any, rollout_id: int) -> list[list]:
    """Stand-in for ``abort`` at the end of a rollout: set the flag (the real one then aborts every
    SGLang server until idle), wait for the pending group tasks and, with ``partial_rollout``, return
    their groups for the data buffer, a sample with a response tagged with ``start_rollout_id``."""
    state = GenerateState(args)
    assert not state.aborted
    state.aborted = True
    aborted_samples = []
    while state.pendings:
        done, state.pendings = await asyncio.wait(state.pendings, return_when=asyncio.FIRST_COMPLETED)
        if not getattr(args, "partial_rollout", False):
            continue
        for task in done:
            group = task.result()
            for sample in group:
                if sample.response and "start_rollout_id" not in sample.metadata:
                    sample.metadata["start_rollout_id"] = rollout_id
            aborted_samples.append(group)
    return aborted_samples
