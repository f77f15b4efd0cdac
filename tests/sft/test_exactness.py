"""A demonstration, rendered by the model's chat template, is the token sequence the RL rollout makes
of the same episode: for every registered env, both Qwen-VL formats and each history."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sft_helpers import oracle_demo, replies_of, rollout

from vlm_envs import list_envs
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.trajectory import Status
from vlm_envs.sft import conversations
from vlm_envs.testing import build_tiny_processor

ENVS = sorted(spec.name for spec in list_envs())
SEEDS = (0, 1)


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen3_vl"])
def codec(request: pytest.FixtureRequest) -> ChatCodec:
    return ChatCodec(build_tiny_processor(request.param))


@pytest.mark.parametrize("name", ENVS)
@pytest.mark.parametrize("history", ["full", "window:1", "window:0"])
def test_demonstrations_render_to_the_rollouts_tokens(codec: ChatCodec, name: str, history: str) -> None:
    for seed in SEEDS:
        demo = oracle_demo(name, seed)
        assert demo.success, f"{name} seed {seed}: the oracle lost"
        traj = rollout(codec, name, seed, replies_of(demo), history)
        assert traj.status is Status.COMPLETED, traj.error
        convs = conversations(demo, history)
        if history == "full":
            (conv,) = convs
            assert _same_messages(conv.messages, traj.messages)
            rendered = codec.render_conversation(conv.messages)
            n = len(traj.tokens)
            assert rendered[:n] == traj.tokens
            # what the template adds after the last end-of-turn token belongs to no sample
            assert codec.decode(rendered[n:], skip_special_tokens=False) == "\n"
            continue
        assert len(convs) == len(traj.turns)
        for turn, conv in enumerate(convs):
            prompt = codec.render_conversation(conv.messages[:-1], add_generation_prompt=True)
            assert prompt == list(traj.context(turn).ids), f"{name} seed {seed} turn {turn}"
            assert [*codec.tokenize(conv.messages[-1]["content"]), codec.end_of_turn_id] == list(
                traj.turns[turn].reply.ids
            )


def _same_messages(ours: Sequence[dict], theirs: Sequence[dict]) -> bool:
    """The rollout's messages hold the same roles and texts (it keeps reply token ids beside them)."""
    return [(m["role"], _texts(m)) for m in ours] == [(m["role"], _texts(m)) for m in theirs]


def _texts(message: dict) -> list:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [p.get("text") if p.get("type") != "image" else p["image"].tobytes() for p in content]


@pytest.mark.parametrize("name", ENVS)
def test_rationales_keep_the_oracle_winning_and_render_exactly(codec: ChatCodec, name: str) -> None:
    demo = oracle_demo(name, 0, rationale=True)
    assert demo.success, f"{name}: the oracle with rationales lost"
    traj = rollout(codec, name, 0, replies_of(demo))
    assert traj.status is Status.COMPLETED, traj.error
    rendered = codec.render_conversation(conversations(demo)[0].messages)
    assert rendered[: len(traj.tokens)] == traj.tokens
