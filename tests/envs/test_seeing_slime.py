"""ZoomSearch and ChartCalc end to end through the slime hook over the HTTP test server with the tiny model.

The model's replies are scripted with each env's oracle, so the episodes go where the test wants: a tool
call (a zoom answered with an image, a calc answered with text), then the final answer.
"""

import asyncio

import pytest
from rollout_helpers import assert_trainer_invariants, script, slime_args
from slime.rollout.sglang_rollout import GenerateState
from slime.utils.types import Sample

from vlm_envs import build_env
from vlm_envs.rollout import contract
from vlm_envs.rollout import slime as hook
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status

#: Small canvases keep the tiny model's image work short; the env logic is the same at any size.
CONFIGS = {
    "vlm_envs.envs.zoom_search": {
        "canvas": 896,
        "view": 448,
        "crop_view": 224,
        "distractors": 8,
        "glyph_px": 8,
    },
    "vlm_envs.envs.chart_calc": {"image_size": [448, 448]},
}


@pytest.fixture(scope="module")
def served(sglang_server, tiny_engine):
    return sglang_server, ChatCodec(tiny_engine.processor)


@pytest.fixture(autouse=True)
def fresh_state():
    GenerateState.forget()
    yield
    GenerateState.forget()


def oracle_replies(module: str, seed: int) -> list[str]:
    env = build_env(module, **CONFIGS[module])
    env.reset(seed=seed)
    replies, done = [], False
    while not done:
        replies.append(env.oracle_response())
        _, done, _ = env.step(replies[-1])
    assert env.episode_reward() == 1.0
    return replies


def run_hook(server, sample, **args):
    ns = slime_args(server, **args)

    async def one():
        try:
            return await hook.generate(ns, sample, {"temperature": 1.0, "max_new_tokens": 256})
        finally:
            await hook.close()

    return asyncio.run(one())


def assert_sample_contract(sample, codec):
    """The suite's one Sample contract, plus what these episodes must be: finished, with images."""
    assert sample.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)
    assert contract.sample_violations(sample, codec.token_space) == []
    assert sample.response_length > 0
    assert len(sample.multimodal_inputs["images"]) == len(sample.multimodal_train_inputs["image_grid_thw"])


@pytest.mark.parametrize(
    ("module", "images"), [("vlm_envs.envs.zoom_search", 2), ("vlm_envs.envs.chart_calc", 1)]
)
def test_the_oracle_episode_through_the_slime_hook(served, module, images):
    server, codec = served
    seed = 3
    replies = oracle_replies(module, seed)
    assert len(replies) == 2
    script(server, codec, *replies)
    sample = Sample(index=0, metadata={"env": module, "seed": seed, "env_config": CONFIGS[module]})
    run_hook(server, sample, max_turns=4)
    record = sample.metadata["vlm_envs"]
    assert sample.status is Sample.Status.COMPLETED, record["error"]
    assert sample.reward == 1.0 and record["metrics"]["success"] is True
    assert_sample_contract(sample, codec)
    assert len(sample.multimodal_inputs["images"]) == images  # ZoomSearch: the view and the zoom's crop
    assert sample.loss_mask.count(0) > 0  # the tool observation is in the response, masked


@pytest.mark.parametrize("module", list(CONFIGS))
def test_the_trajectory_keeps_the_trainer_invariants(served, module):
    server, codec = served
    env = build_env(module, **CONFIGS[module])
    replies = oracle_replies(module, 5)
    script(server, codec, *replies)

    async def main():
        async with SGLangEngine(server.url, max_retries=2, backoff=0.01, turn_timeout=30) as engine:
            config = EpisodeConfig(max_turns=4, max_new_tokens=256, check_template=True)
            return await run_episode(
                env, engine, codec, seed=5, config=config, sampling_params={"temperature": 1.0}
            )

    traj = asyncio.run(main())
    assert traj.status is Status.COMPLETED and traj.reward == 1.0, traj.error
    assert traj.turns[0].observation.role == "tool"
    assert traj.template_check.ok, traj.template_check.detail
    assert_trainer_invariants(traj, codec)
