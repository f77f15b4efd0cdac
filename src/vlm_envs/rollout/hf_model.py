"""A transformers Qwen-VL model run in this process: its inputs for one sequence, and the log probs
of what it generated.

Shared by every in-process engine (the TRL trainer's own model, the tiny test engine), so they feed
the model the same way a trainer's forward pass does and report log probs the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch


def model_inputs(
    ids: Sequence[int],
    vision: Mapping[str, torch.Tensor] | None,
    image_token_id: int,
    device: torch.device | str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of a forward (or ``generate``) over the one sequence ``ids``.

    ``vision`` holds ``pixel_values`` and ``image_grid_thw`` of the images whose (expanded) pad
    tokens ``ids`` holds, in order; ``mm_token_type_ids`` marks those pads, which M-RoPE positions
    need (transformers' ``ProcessorMixin.create_mm_token_type_ids``: 1 on image tokens).
    """
    tensor = torch.tensor([list(ids)], dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {"input_ids": tensor, "attention_mask": torch.ones_like(tensor)}
    if vision:
        kwargs["pixel_values"] = vision["pixel_values"].to(device) if device else vision["pixel_values"]
        kwargs["image_grid_thw"] = vision["image_grid_thw"].to(device) if device else vision["image_grid_thw"]
        kwargs["mm_token_type_ids"] = (tensor == image_token_id).long()
    return kwargs


def sampled_log_probs(
    step_logits: Sequence[torch.Tensor], token_ids: Sequence[int], temperature: float | None
) -> list[float]:
    """The log prob of each generated token under ``log_softmax(logits / temperature)``.

    ``step_logits[k]`` are the raw logits (``generate(output_logits=True)``) of step ``k`` for a
    batch of one; a temperature of 0 or ``None`` (greedy) scores the raw logits. This is what a
    trainer's forward pass at the same temperature computes.
    """
    scale = temperature or 1.0
    return [
        float(torch.log_softmax(logits[0].float() / scale, dim=-1)[token])
        for logits, token in zip(step_logits, token_ids, strict=False)
    ]
