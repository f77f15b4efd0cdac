"""A transformers Qwen-VL model run in this process: its inputs for one sequence or a left-padded
batch, and the log probs of what it generated.

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


def batch_inputs(
    sequences: Sequence[Sequence[int]],
    visions: Sequence[Mapping[str, torch.Tensor]],
    image_token_id: int,
    pad_id: int,
    device: torch.device | str | None = None,
) -> dict[str, Any]:
    """Keyword arguments of one ``generate`` over ``sequences``, left padded with ``pad_id``.

    ``visions[i]`` holds the vision inputs of ``sequences[i]`` (``{}``: none); they are concatenated
    in row order, as the model takes the images of a batch.
    """
    width = max(len(ids) for ids in sequences)
    rows = [[pad_id] * (width - len(ids)) + list(ids) for ids in sequences]
    mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids in sequences]
    tensor = torch.tensor(rows, dtype=torch.long, device=device)
    kwargs: dict[str, Any] = {"input_ids": tensor, "attention_mask": torch.tensor(mask, device=device)}
    with_images = [v for v in visions if v]
    if with_images:
        kwargs["pixel_values"] = torch.cat([v["pixel_values"] for v in with_images]).to(device)
        kwargs["image_grid_thw"] = torch.cat([v["image_grid_thw"] for v in with_images]).to(device)
        kwargs["mm_token_type_ids"] = (tensor == image_token_id).long() * kwargs["attention_mask"]
    return kwargs


def batch_log_probs(
    step_logits: Sequence[torch.Tensor], rows: Sequence[Sequence[int]], temperature: float | None
) -> list[list[float]]:
    """The log prob of each generated token of each row under ``log_softmax(logits / temperature)``.

    ``step_logits[k]`` are the raw logits (``generate(output_logits=True)``) of step ``k``, one row
    per sequence; ``rows[i]`` the tokens row ``i`` kept (at most one per step). A temperature of 0
    or ``None`` (greedy) scores the raw logits. This is what a trainer's forward pass at the same
    temperature computes.
    """
    scale = temperature or 1.0
    out: list[list[float]] = [[] for _ in rows]
    for k, logits in enumerate(step_logits[: max((len(r) for r in rows), default=0)]):
        live = [i for i, row in enumerate(rows) if k < len(row)]
        tokens = torch.tensor([rows[i][k] for i in live], device=logits.device)
        picked = torch.log_softmax(logits[live].float() / scale, dim=-1).gather(1, tokens[:, None])
        for i, value in zip(live, picked[:, 0].tolist(), strict=True):
            out[i].append(value)
    return out


def sampled_log_probs(
    step_logits: Sequence[torch.Tensor], token_ids: Sequence[int], temperature: float | None
) -> list[float]:
    """:func:`batch_log_probs` of a batch of one."""
    return batch_log_probs(step_logits, [token_ids], temperature)[0]
