"""The warm start of the learning benchmarks: a tiny Qwen2-VL after a few SFT steps on an env's oracle
demonstrations (``make-sft``'s per-reply rows, TRL's ``SFTTrainer``, trained on the replies only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import torch
from trl import SFTConfig, SFTTrainer

from vlm_envs.sft import OracleSource, make_sft
from vlm_envs.testing import build_tiny_qwen2_vl


def warm_start(
    processor: Any, env: str, turns: int, history: str, steps: int, work: Path
) -> dict[str, torch.Tensor]:
    """The tiny model's weights after ``steps`` SFT steps on oracle play of ``env`` (seeds 0..63, at most
    ``turns`` turns); each row's context is what the policy sees under ``history`` (``window:K``)."""
    model = build_tiny_qwen2_vl(processor).train()
    if steps:
        # one prompt-completion row per reply: TRL trains on the completion only, as the warm start needs
        make_sft(OracleSource((env,), 64, max_turns=turns), work / "sft", fmt="trl", history=history)
        data = datasets.load_dataset("parquet", data_files=str(work / "sft" / "train.parquet"))["train"]
        config = SFTConfig(
            output_dir=str(work / "sft-out"),
            use_cpu=True,
            bf16=False,
            per_device_train_batch_size=8,
            max_steps=steps,
            learning_rate=3e-3,
            report_to=[],
            save_strategy="no",
            max_length=None,
            seed=0,
        )
        SFTTrainer(model=model, args=config, train_dataset=data, processing_class=processor).train()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
