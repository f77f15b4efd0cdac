"""Shared pieces of the SFT tests: oracle demonstrations and the rollout of the same episode."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from vlm_envs.configured import build_configured_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import EngineOutput
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.sft import Demonstration, play_oracle

MAX_TURNS = 12


class ReplyEngine:
    """Answers each request with the next of ``texts``, tokenized and closed by the end-of-turn token."""

    def __init__(self, codec: ChatCodec, texts: Sequence[str]) -> None:
        self.codec, self.texts = codec, list(texts)

    async def generate(self, input_ids: Sequence[int], images: Sequence[Any], params: Any) -> EngineOutput:
        ids = [*self.codec.tokenize(self.texts.pop(0)), self.codec.end_of_turn_id]
        return EngineOutput(token_ids=ids, log_probs=[-0.1] * len(ids), finish_reason="stop")


def rollout(codec: ChatCodec, name: str, seed: int, replies: list[str], history: str = "full") -> Trajectory:
    """Episode ``seed`` of ``name`` played by the rollout with these replies."""
    env = build_configured_env(name, MAX_TURNS, {})
    config = EpisodeConfig(max_turns=MAX_TURNS, history=history)
    try:
        return asyncio.run(run_episode(env, ReplyEngine(codec, replies), codec, seed=seed, config=config))
    finally:
        env.close()


def oracle_demo(name: str, seed: int, rationale: bool = False) -> Demonstration:
    """Episode ``seed`` of ``name`` played by its oracle."""
    env = build_configured_env(name, MAX_TURNS, {})
    try:
        return play_oracle(env, name, seed, MAX_TURNS, rationale=rationale)
    finally:
        env.close()


def replies_of(demo: Demonstration) -> list[str]:
    return [m["content"] for m in demo.messages if m["role"] == "assistant"]
