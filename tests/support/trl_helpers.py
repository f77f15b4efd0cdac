"""TRL test helpers: make-dataset's TRL rows as a datasets.Dataset, a tiny model, and a trainer that
records what TRL computed in each loss (its inputs, its per-token log probs and their gradients)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import datasets
import torch
from trl import GRPOConfig

from vlm_envs.datasets.trl import trl_rows
from vlm_envs.rollout.trl import VlmEnvsGRPOTrainer
from vlm_envs.rollout.trl.trainer import ROWS_KEY
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


def check_losses(
    trainer: RecordingTrainer, after_generation: set[int], max_turns: int, learns: bool = True
) -> None:
    """What every loss TRL computed must hold: TRL's per-token log probs equal the rollout engine's
    (fp32, 1e-4) on the losses in ``after_generation`` (computed before any update since their batch
    was generated), and its old log probs always; its loss mask is ours, turn by turn; the gradient on
    observation tokens' log probs is exactly zero, and nonzero exactly on the live tokens (below);
    budgets hold, no episode failed; ``learns``: some token learns."""
    assert trainer.losses
    learned = False
    for index, record in enumerate(trainer.losses):
        inputs, rows = record.inputs, record.inputs[ROWS_KEY]
        trained = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
        observation = inputs["completion_mask"].bool() & ~inputs["tool_mask"].bool()
        for r, row in enumerate(rows):
            n = len(row.completion_ids)
            assert trained[r, :n].int().tolist() == row.env_mask and not trained[r, n:].any()
            assert n <= trainer.args.max_completion_length
            assert row.record["num_turns"] <= max_turns and row.record["status"] in ("completed", "truncated")
            turns = row.record["turns"]  # our loss mask: each turn's reply, then its observation
            expected = [m for t in turns for m in [1] * t["generated_tokens"] + [0] * t["observation_tokens"]]
            assert row.env_mask == expected
        sampling = inputs["sampling_per_token_logps"]
        if index in after_generation:
            gap = (record.logps.detach() - sampling).abs()[trained]
            assert gap.max().item() < 1e-4, (
                f"loss {index}: TRL's log probs differ from the rollout's by {gap.max()}"
            )
        old = inputs.get("old_per_token_logps")
        if old is not None:  # computed in the generation phase, with every image, before any update
            assert (old - sampling).abs()[trained].max().item() < 1e-4
        grad = record.logps.grad
        assert grad is not None  # (a tool env's episode may end on its first reply: no observation)
        assert torch.equal(grad[observation], torch.zeros_like(grad[observation]))
        live = live_tokens(trainer, record, old)
        assert torch.equal(grad[trained] != 0, live[trained]), f"loss {index}: gradient off its live tokens"
        learned |= bool(live[trained].any())
        if record.entropies is not None and record.entropies.grad is not None:
            assert not record.entropies.grad[observation].any()
    assert learned or not learns, "no token got a gradient"


def live_tokens(trainer: RecordingTrainer, record: LossRecord, old: torch.Tensor | None) -> torch.Tensor:
    """The tokens whose log prob gets a gradient from TRL's clipped loss (token-level ratios): a
    nonzero advantage, and a ratio to the old policy that PPO's clip does not hold at its bound.
    After an update, a whole loss can be clipped: its gradient is then exactly 0."""
    logps = record.logps.detach()
    ratio = torch.exp(logps - (logps if old is None else old))
    advantages = record.inputs["advantages"].unsqueeze(1).expand_as(ratio)
    clipped = ((ratio > 1 + trainer.epsilon_high) & (advantages > 0)) | (
        (ratio < 1 - trainer.epsilon_low) & (advantages < 0)
    )
    return (advantages != 0) & ~clipped
