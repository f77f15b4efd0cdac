"""Real GRPO steps with TRL's GRPOTrainer on our envs (CPU, tiny Qwen-VL built in code).

Each run records every loss TRL computed and checks: TRL's per-token log probs over the completion
equal the rollout engine's (fp32, 1e-4) with every turn's image in the forward pass; the loss mask
TRL uses is our loss mask; the gradient on observation tokens' log probs is exactly zero; the
parameters move; budgets hold; the user's own dataset columns reach the reward functions.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
import trl_helpers
from trl import GRPOTrainer

from vlm_envs.rollout.trl import StockTrainerError, episode_reward, rollout_func
from vlm_envs.rollout.trl.trainer import ROWS_KEY

#: Tiny random models emit anything: each turn is cut at 12 tokens, so episodes play several turns.
TURN_TOKENS, BUDGET, MAX_TURNS = 12, 400, 3


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model runs faster on one thread than on two shared cores
    yield
    torch.set_num_threads(threads)


def seen_rewards(
    difficulty: list[int], vlm_envs: list[dict[str, Any]], completion_ids: list[list[int]], **_: Any
):
    """A user's reward function: reads its own column (aligned with each entry's episode) and scores
    the variety of the completion's tokens, so the advantages are seldom all zero."""
    assert difficulty == [record["seed"] * 10 for record in vlm_envs]
    return [len(set(ids)) / 100 for ids in completion_ids]


def with_difficulty(data: Any) -> Any:
    return data.add_column("difficulty", [seed * 10 for seed in range(len(data))])


def params_of(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def check_losses(
    trainer: trl_helpers.RecordingTrainer, after_generation: set[int], learns: bool = True
) -> None:
    """What every loss TRL computed must hold (see the module doc); ``after_generation``: the losses
    computed before any update since their batch was generated (log probs then equal the engine's);
    ``learns``: some loss had a nonzero advantage."""
    assert trainer.losses
    assert any(record.inputs["advantages"].any() for record in trainer.losses) or not learns
    for index, record in enumerate(trainer.losses):
        inputs, rows = record.inputs, record.inputs[ROWS_KEY]
        trained = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
        observation = inputs["completion_mask"].bool() & ~inputs["tool_mask"].bool()
        for r, row in enumerate(rows):
            n = len(row.completion_ids)
            assert trained[r, :n].int().tolist() == row.env_mask and not trained[r, n:].any()
            assert n <= BUDGET and row.record["num_turns"] <= MAX_TURNS
            if row.record["status"] != "failed":  # our loss mask: each turn's reply, then its observation
                turns = row.record["turns"]
                expected = [
                    m for t in turns for m in [1] * t["generated_tokens"] + [0] * t["observation_tokens"]
                ]
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
        assert grad is not None and observation.any()
        assert torch.equal(grad[observation], torch.zeros_like(grad[observation]))
        assert (grad[trained].abs().sum() > 0) == bool(inputs["advantages"].any())
        if record.entropies is not None and record.entropies.grad is not None:
            assert not record.entropies.grad[observation].any()


def test_sokoban_trains_on_every_turns_image(tmp_path: Path) -> None:
    data = with_difficulty(trl_helpers.dataset("sokoban", 2, max_turns=MAX_TURNS))
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": TURN_TOKENS})
    trainer = trl_helpers.trainer(data, args, reward_funcs=[episode_reward, seen_rewards])
    before = params_of(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 2
    check_losses(trainer, after_generation={0, 1})
    rows = [row for generation in trainer.generations for row in generation[ROWS_KEY]]
    assert max(row.num_images for row in rows) >= 2, "no episode reached an image after its first turn"
    assert all(row.num_images == row.record["num_turns"] for row in rows if row.record["status"] != "failed")
    assert any(not torch.equal(a, b) for a, b in zip(before, params_of(trainer.model), strict=True))
    logged = trainer.state.log_history[0]
    assert "vlm_envs/status/truncated" in logged and "rewards/episode_reward/mean" in logged
    assert math.isclose(
        sum(logged[f"vlm_envs/status/{s}"] for s in ("completed", "truncated", "failed", "aborted")), 1
    )


def test_qwen3_vl_format_and_reused_generations(tmp_path: Path) -> None:
    """Qwen3-VL's template and patch size; num_iterations=2 makes TRL compute the old log probs in its
    generation phase, and train twice on each generation (the second loss after an update)."""
    data = with_difficulty(trl_helpers.dataset("sokoban", 2, max_turns=MAX_TURNS))
    args = trl_helpers.config(tmp_path, num_iterations=2, max_steps=3)
    trainer = trl_helpers.trainer(data, args, family="qwen3_vl", reward_funcs=[episode_reward, seen_rewards])
    trainer.train()
    assert len(trainer.generations) == 2 and len(trainer.losses) == 3
    assert all("old_per_token_logps" in generation for generation in trainer.generations)
    check_losses(trainer, after_generation={0, 2})


def test_geo3k_tool_turns_train(tmp_path: Path) -> None:
    """Geo3k's calc_score tool answers in a tool message. A random model never writes a tool call, so
    generation is biased toward the oracle's first reply (transformers' sequence_bias: each token of
    it after its prefix); the log probs stay the model's own, which TRL's must equal. Every episode
    of a group then plays alike: no advantage, so nothing to learn here (the Sokoban runs learn)."""
    data = with_difficulty(trl_helpers.dataset("geo3k", 2, max_turns=2))
    processor = trl_helpers.build_tiny_processor()
    from vlm_envs import build_env

    env = build_env("geo3k")
    env.reset(seed=0)
    reply = processor.tokenizer.encode(env.oracle_response(), add_special_tokens=False)
    reply.append(processor.tokenizer.convert_tokens_to_ids("<|im_end|>"))
    bias = [[reply[: k + 1], 100.0 * (k + 1)] for k in range(len(reply))]
    args = trl_helpers.config(
        tmp_path, generation_kwargs={"max_new_tokens": len(reply), "sequence_bias": bias}, max_steps=2
    )
    trainer = trl_helpers.trainer(data, args, reward_funcs=[episode_reward, seen_rewards])
    trainer.train()
    check_losses(trainer, after_generation={0, 1}, learns=False)
    records = [row.record for generation in trainer.generations for row in generation[ROWS_KEY]]
    assert any(turn["metrics"].get("tool_calls") for record in records for turn in record["turns"])


def test_stock_grpo_trainer_refuses_episodes_with_images(tmp_path: Path) -> None:
    """Stock GRPOTrainer re-renders the dataset prompt for its loss (images=None on this path): our
    rollout refuses to hand it image episodes rather than let it train on misaligned images."""
    data = trl_helpers.dataset("sokoban", 2, max_turns=MAX_TURNS)
    args = trl_helpers.config(tmp_path, max_steps=1)
    trainer = trl_helpers.trainer(
        data, args, cls=GRPOTrainer, reward_funcs=[episode_reward], rollout_func=rollout_func
    )
    with pytest.raises(StockTrainerError, match="VlmEnvsGRPOTrainer"):
        trainer.train()
