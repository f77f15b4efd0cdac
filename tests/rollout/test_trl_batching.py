"""The TRL rollout's policy engine batches the turns of concurrent episodes into one ``generate``
(left padded, every turn's images included) and splits the replies back: greedy play equals the
same episodes played one at a time token for token, each with its own budget and stop ids."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("trl")

import torch
from transformers import GenerationConfig

from vlm_envs import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.rollout.trl.policy import PolicyEngine, cut
from vlm_envs.testing import build_tiny_processor, build_tiny_qwen2_vl

EPISODES = 6


@pytest.fixture(scope="module")
def parts() -> Iterator[tuple[Any, ChatCodec, concurrent.futures.ThreadPoolExecutor]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    processor = build_tiny_processor()
    model = build_tiny_qwen2_vl(processor).eval()
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        yield model, ChatCodec(processor), thread
    torch.set_num_threads(threads)


def engine_of(parts: tuple) -> PolicyEngine:
    model, codec, thread = parts
    config = GenerationConfig(do_sample=False, pad_token_id=codec.tokenizer.pad_token_id)
    return PolicyEngine(model, codec, config, thread)


def play(engine: PolicyEngine, seed: int, max_new_tokens: int, stops: list[int]) -> Any:
    config = EpisodeConfig(max_turns=3, max_new_tokens=max_new_tokens, engine_images="pil")

    async def one() -> Trajectory:
        with engine.playing():
            return await run_episode(
                build_env("sokoban"),
                engine,
                engine.codec,
                seed=seed,
                config=config,
                sampling_params={"stop_token_ids": stops},
            )

    return one()


def test_batched_greedy_play_equals_one_episode_at_a_time(parts: tuple) -> None:
    alone = asyncio.run(play(engine_of(parts), 0, 10, []))
    extra_stop = alone.turns[0].reply.ids[2]  # a token the model emits: a stop id for half the episodes
    settings = [(seed, 6 + 4 * (seed % 2), [extra_stop] if seed % 3 == 0 else []) for seed in range(EPISODES)]

    async def together() -> list[Trajectory]:
        return list(await asyncio.gather(*(play(batched, *s) for s in settings)))

    batched = engine_of(parts)
    trajs = asyncio.run(together())
    turns = sum(len(t.turns) for t in trajs)
    assert max(batched.batches) > 1 and len(batched.batches) < turns, batched.batches
    assert sum(batched.batches) == turns
    for (seed, max_new, stops), traj in zip(settings, trajs, strict=True):
        single = engine_of(parts)
        reference = asyncio.run(play(single, seed, max_new, stops))
        assert set(single.batches) == {1}
        assert traj.status is reference.status and traj.status is not Status.FAILED, traj.error
        assert len(traj.images) == len(reference.images) == len(traj.turns)
        assert traj.tokens == reference.tokens, f"seed {seed}: batched play differs from play alone"
        assert traj.log_probs == pytest.approx(reference.log_probs, abs=1e-5)
        for turn in traj.turns:
            assert len(turn.reply.ids) <= max_new
            ended = turn.reply.ids[-1] in (*stops, *parts[1].stop_token_ids)
            assert ended or len(turn.reply.ids) == max_new
    stopped = [t.reply.ids[-1] for traj in trajs[::3] for t in traj.turns]
    assert extra_stop in stopped  # an episode's own stop id ended its reply in a batch with others


def test_a_failing_generate_fails_each_waiting_episode_with_the_engine_named(parts: tuple) -> None:
    engine = engine_of(parts)
    engine.model = None  # generate raises AttributeError on the model thread

    async def together() -> list[Trajectory]:
        return list(await asyncio.gather(*(play(engine, seed, 6, []) for seed in range(3))))

    trajs = asyncio.run(together())
    assert all(t.status is Status.FAILED and "trainer model" in t.error for t in trajs)


def test_cut_keeps_the_rows_own_budget_and_first_stop() -> None:
    assert cut([5, 6, 7, 8], 3, [9]) == [5, 6, 7]
    assert cut([5, 9, 7, 9], 4, [9]) == [5, 9]
    assert cut([5, 6, 7, 0, 0], 10, [7]) == [5, 6, 7]


def test_the_trainers_model_never_samples_an_image_special_token(parts: tuple) -> None:
    """A model that prefers every image special token (TRL's config suppresses only the pad) still plays
    its episodes to the end: each would otherwise end at its first reply."""
    model, codec, _ = parts
    special = sorted(codec.special_image_ids)
    assert len(special) > 1  # vision start and end, the pad, ...

    def prefer_special(module: Any, inputs: Any, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.clone()
        logits[..., special] += 1e4
        return logits

    hook = model.lm_head.register_forward_hook(prefer_special)
    try:
        traj = asyncio.run(play(engine_of(parts), 0, 6, []))
    finally:
        hook.remove()
    assert traj.status is Status.TRUNCATED and len(traj.turns) == 3, traj.error  # max_turns, not a stop
    assert not {t for turn in traj.turns for t in turn.reply.ids} & set(special)
