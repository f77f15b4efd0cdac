"""TRL test helpers: make-dataset's TRL rows as a datasets.Dataset, a tiny model, and a trainer that
records what TRL computed in each loss (its inputs, its per-token log probs and their gradients)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import datasets
import torch
from trl import GRPOConfig

from vlm_envs.eval.trl_dataset import trl_rows
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl, build_tiny_qwen3_vl

MODELS = {"qwen2_vl": build_tiny_qwen2_vl, "qwen3_vl": build_tiny_qwen3_vl}


def dataset(env: str, n: int, max_turns: int = 3, **env_config: Any) -> datasets.Dataset:
    """``n`` rows of ``make-dataset ENV --trainer trl`` (seeds 0..n-1) as TRL reads them."""
    rows = trl_rows(env, n, 0, max_turns, dict(env_config))
    table = datasets.Dataset.from_list(rows)
    return table.cast_column("images", datasets.Sequence(datasets.Image()))


def config(tmp_path: Path, **overrides: Any) -> GRPOConfig:
    """A CPU GRPOConfig for a few quick steps (2 prompts x 2 generations per step)."""
    settings: dict[str, Any] = dict(
        output_dir=str(tmp_path / "grpo"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=400,
        generation_kwargs={"max_new_tokens": 12},
        max_steps=2,
        learning_rate=1e-2,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        seed=0,
    )
    settings.update(overrides)
    return GRPOConfig(**settings)


@dataclasses.dataclass
class LossRecord:
    """One loss computation: TRL's inputs and the per-token log probs it computed (with their grad)."""

    inputs: dict[str, Any]
    logps: torch.Tensor
    entropies: torch.Tensor | None


class RecordingTrainer(VlmEnvsGRPOTrainer):
    """VlmEnvsGRPOTrainer that keeps every loss's inputs and log probs, and every generation batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.losses: list[LossRecord] = []
        self.generations: list[dict[str, Any]] = []
        self._current: dict[str, Any] | None = None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        self.generations.append(output)
        return output

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        self._current = inputs
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._current = None

    def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._current is not None and logps.requires_grad:
            logps.retain_grad()
            if entropies is not None and entropies.requires_grad:
                entropies.retain_grad()
            self.losses.append(LossRecord(self._current, logps, entropies))
        return logps, entropies, aux


def trainer(
    data: datasets.Dataset,
    args: GRPOConfig,
    family: str = "qwen2_vl",
    cls: type = RecordingTrainer,
    **kwargs: Any,
) -> Any:
    """A trainer on a fresh tiny model of ``family`` (seed 0)."""
    processor = build_tiny_processor(family)
    model = MODELS[family](processor).train()
    return cls(model=model, args=args, train_dataset=data, processing_class=processor, **kwargs)
