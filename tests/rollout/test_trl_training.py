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

from vlm_envs import build_env
from vlm_envs.rollout.trl import StockTrainerError, episode_reward, rollout_func
from vlm_envs.rollout.trl.trainer import ROWS_KEY

#: Tiny random models emit anything: each turn is cut at 12 tokens, so episodes play several turns.
TURN_TOKENS, MAX_TURNS = 12, 3


pytestmark = pytest.mark.usefixtures("one_torch_thread")


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


def test_sokoban_trains_on_every_turns_image(tmp_path: Path) -> None:
    data = with_difficulty(trl_helpers.dataset("sokoban", 2, max_turns=MAX_TURNS))
    args = trl_helpers.config(tmp_path, generation_kwargs={"max_new_tokens": TURN_TOKENS})
    trainer = trl_helpers.trainer(data, args, reward_funcs=[episode_reward, seen_rewards])
    before = params_of(trainer.model)
    trainer.train()
    assert trainer.state.global_step == 2
    trl_helpers.check_losses(trainer, {0, 1}, MAX_TURNS)
    for generation in trainer.generations:  # TRL repeats each prompt: a GRPO group plays one seed
        seeds = [row.record["seed"] for row in generation[ROWS_KEY]]
        assert seeds[0] == seeds[1] and seeds[2] == seeds[3] and sorted(seeds) == [0, 0, 1, 1]
    rows = [row for generation in trainer.generations for row in generation[ROWS_KEY]]
    assert max(row.num_images for row in rows) >= 2, "no episode reached an image after its first turn"
    assert all(0 in row.env_mask for row in rows)  # observation tokens, with their zero gradient
    assert all(row.num_images == row.record["num_turns"] for row in rows)
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
    trl_helpers.check_losses(trainer, {0, 2}, MAX_TURNS)


@pytest.mark.parametrize(
    "family", ["qwen2_vl", "qwen3_vl"]
)  # Qwen3's template wraps tool replies in a user turn
def test_geo3k_tool_turns_train(family: str, tmp_path: Path) -> None:
    """Geo3k's calc_score tool answers in a tool message. A random model never writes a tool call, so
    generation is biased toward the oracle's first reply (transformers' sequence_bias: each token of
    it after its prefix); the log probs stay the model's own, which TRL's must equal. Every episode
    of a group then plays alike: no advantage, so nothing to learn here (the Sokoban runs learn)."""
    data = with_difficulty(trl_helpers.dataset("geo3k", 2, max_turns=2))
    processor = trl_helpers.build_tiny_processor(family)
    env = build_env("geo3k")
    env.reset(seed=0)
    reply = processor.tokenizer.encode(env.oracle_response(), add_special_tokens=False)
    reply.append(processor.tokenizer.convert_tokens_to_ids("<|im_end|>"))
    bias = [[reply[: k + 1], 100.0 * (k + 1)] for k in range(len(reply))]
    args = trl_helpers.config(
        tmp_path, generation_kwargs={"max_new_tokens": len(reply), "sequence_bias": bias}, max_steps=2
    )
    trainer = trl_helpers.trainer(data, args, family=family, reward_funcs=[episode_reward, seen_rewards])
    trainer.train()
    trl_helpers.check_losses(trainer, {0, 1}, 2, learns=False)
    records = [row.record for generation in trainer.generations for row in generation[ROWS_KEY]]
    tool_turns = [t for r in records for t in r["turns"] if t["metrics"].get("tool_calls")]
    assert tool_turns and tool_turns[0]["observation_tokens"] > 0  # the tool reply, a tool message


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
