"""FogMaze, Jigsaw and MentalRotation end to end through the slime hook over the HTTP test server
with the tiny model: the scripted replies are the oracle's, so each episode is won."""

from __future__ import annotations

import asyncio
import math

import pytest
from rollout_helpers import script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs.registry import build_env
from vlm_envs.rollout import slime as hook

CASES = {
    "vlm_envs.envs.fog_maze": {
        "size": [4, 4],
        "min_distance": 3,
        "view": "first_person",
        "image_size": [64, 48],
    },
    "vlm_envs.envs.jigsaw": {"n": 2, "image_size": 64, "max_swaps_per_turn": 1},
    "vlm_envs.envs.mental_rotation": {"image_size": 64, "max_actions_per_turn": 1},
}


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def oracle_replies(target: str, config: dict, seed: int) -> list[str]:
    env = build_env(target, **config)
    env.reset(seed=seed)
    replies, done = [], False
    while not done:
        reply = env.oracle_response()
        replies.append(reply)
        done = env.step(reply)[1]
    return replies


@pytest.mark.parametrize("target", sorted(CASES))
def test_oracle_episode_through_the_slime_hook(served, target):
    server, codec = served
    args = slime_args(server, rollout_max_response_len=4096, rollout_interaction_env_path=target, max_turns=8)
    config = CASES[target]
    sample = Sample(index=0, metadata={"env_config": config, "seed": 3})
    replies = oracle_replies(target, config, 3)
    script(server, codec, *replies)

    async def one() -> Sample:
        try:
            return await hook.generate(args, sample, {"temperature": 1.0, "max_new_tokens": 4096})
        finally:
            await hook.close()

    asyncio.run(one())
    record = sample.metadata["vlm_envs"]
    assert sample.status is Sample.Status.COMPLETED, record["error"]
    assert sample.reward == 1.0 and record["metrics"]["success"] is True
    assert record["num_turns"] == len(replies) and record["template_check"] is True
    assert len(sample.loss_mask) == len(sample.rollout_log_probs) == sample.response_length
    assert all(lp == 0.0 for lp, m in zip(sample.rollout_log_probs, sample.loss_mask, strict=True) if m == 0)
    assert all(math.isfinite(lp) for lp in sample.rollout_log_probs) and sum(sample.loss_mask) > 0
    train = sample.multimodal_train_inputs
    grids = train["image_grid_thw"].tolist()
    assert (
        len(grids) == len(sample.multimodal_inputs["images"]) == record["num_turns"] * images_per_turn(target)
    )
    assert train["pixel_values"].shape[0] == sum(math.prod(g) for g in grids)
    assert sample.tokens.count(codec.image_token_id) == sum(math.prod(g) // 4 for g in grids)
    generated = [
        t for t, m in zip(sample.tokens[-sample.response_length :], sample.loss_mask, strict=True) if m
    ]
    assert not set(generated) & set(codec.special_image_ids)


def images_per_turn(target: str) -> int:
    """Images per observation after the first (which carries the same count): two views for rotation."""
    return 2 if target.endswith("mental_rotation") else 1
