"""Windowed history: every turn of an episode is a training sample whose prompt is exactly the context
the engine saw (task + last K turns + current observation) and whose response is exactly its reply."""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace

import pytest
from rollout_helpers import script

from vlm_envs import build_env
from vlm_envs.credit.shaping import PotentialShaping
from vlm_envs.rollout import contract
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.history import History, check_shaping, check_turn_reward, turn_rewards
from vlm_envs.rollout.trajectory import Status

SOKOBAN = {"grid_size": (6, 6), "num_boxes": 1, "render_mode": "vision", "max_steps": 100}
MOVES = [
    "<answer>Up</answer>",
    "<answer>Left</answer>",
    "I try <answer>Down</answer>",
    "<answer>Right</answer>",
]


def play(server, codec, env, history, turns=5, seed=4, **config):
    config = {"max_new_tokens": 24, **config}

    async def main():
        async with SGLangEngine(server.url, max_retries=1, backoff=0.01, turn_timeout=60) as engine:
            episode = EpisodeConfig(max_turns=turns, history=history, **config)
            return await run_episode(env, engine, codec, seed=seed, config=episode)

    return asyncio.run(main())


def context_messages(traj, turn: int) -> tuple[list[dict], list[list[int]]]:
    """The messages of ``turn``'s context, from the episode's whole conversation."""
    messages = [{k: v for k, v in m.items() if k != "token_ids"} for m in traj.messages]
    head = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    task = messages[:head]
    if turn == 0:
        return task, []
    if traj.history.window == 0:
        return [*task, messages[head + 2 * turn - 1]], []
    kept = list(traj.history.kept(turn))
    chosen = [m for j in kept for m in (messages[head + 2 * j], messages[head + 2 * j + 1])]
    ids = [traj.messages[head + 2 * j]["token_ids"] for j in kept]
    return [*task, *chosen], ids


def assert_turn_samples_are_exact(server, codec, traj):
    samples = traj.turn_samples()
    assert [s.turn for s in samples] == [t.index for t in traj.turns]
    for sample in samples:
        messages, assistant_ids = context_messages(traj, sample.turn)
        rendered = codec.render_conversation(messages, None, assistant_ids, add_generation_prompt=True)
        assert sample.tokens == rendered + list(sample.reply.ids), f"turn {sample.turn}"
        assert sample.loss_mask == [1] * len(sample.reply.ids) and sample.log_probs == list(
            sample.reply.log_probs
        )
        assert contract.trajectory_violations(sample, codec.token_space) == []
        # the engine's log probs are the model's own log probs of the reply, given exactly this context
        inputs = server.engine.prepare(sample.prompt_ids, [p.image for p in sample.images])
        expected = server.engine.score(inputs, list(sample.reply.ids))
        assert max(abs(a - b) for a, b in zip(expected, sample.log_probs, strict=True)) < 1e-3
    return samples


@pytest.mark.parametrize("window", [0, 1, 2])
def test_windowed_sokoban_turns_are_samples_of_exactly_their_context(served, window):
    server, codec = served
    script(server, codec, *MOVES, MOVES[0])
    traj = play(server, codec, build_env("sokoban", **SOKOBAN), History(window))
    assert traj.status is Status.TRUNCATED and len(traj.turns) == 5, traj.error
    samples = assert_turn_samples_are_exact(server, codec, traj)
    # the context holds the task's frame plus one frame per kept observation (window:0: the current one)
    expected_images = [1] + [1 + (1 if window == 0 else min(window, t)) for t in range(1, 5)]
    assert [len(s.images) for s in samples] == expected_images
    assert [t.context_turns for t in traj.turns] == [s.context.turns for s in samples]
    # what the engine was sent, turn by turn, is each sample's prompt
    sent = [r["input_ids"] for r in server.requests[-5:]]
    assert sent == [s.prompt_ids for s in samples]
    assert [r["image_data"] for r in server.requests[-5:]] == expected_images


def test_a_window_as_long_as_the_episode_is_the_full_history(served):
    server, codec = served
    replies = [*MOVES, MOVES[1]]
    script(server, codec, *replies)
    full = play(server, codec, build_env("sokoban", **SOKOBAN), History())
    script(server, codec, *replies)
    windowed = play(server, codec, build_env("sokoban", **SOKOBAN), History(8))
    last = windowed.turn_samples()[-1]
    assert last.tokens == full.tokens
    assert [p.key for p in last.images] == [p.key for p in full.images]
    assert full.turn_samples()[-1].tokens == full.tokens  # the full history's last turn is its own sample


def test_windowed_geo3k_with_a_tool_turn(served):
    server, codec = served
    env = build_env("geo3k", max_turns=3)
    env.reset(seed=2)
    answer = env.reference_answer
    script(
        server,
        codec,
        f"Check: {env.tool_call('7')}",
        f"Again {env.tool_call(answer)}",
        f"\\boxed{{{answer}}}",
    )
    traj = play(server, codec, env, History(1), turns=3, seed=2, max_new_tokens=96)
    assert traj.status is Status.COMPLETED and traj.reward == 1.0, traj.error
    samples = assert_turn_samples_are_exact(server, codec, traj)
    assert [s.context.turns for s in samples] == [(), (0,), (1,)]
    assert all(len(s.images) == 1 for s in samples)  # the diagram of the task, in every context


def test_the_context_stays_flat_under_a_window_and_grows_without_one(served):
    server, codec = served
    lengths = {}
    for history in (History(1), History()):
        script(server, codec, *["<answer>Up</answer>"] * 8)  # the same move every turn
        traj = play(server, codec, build_env("sokoban", **SOKOBAN), history, turns=8)
        lengths[str(history)] = [len(traj.context(t.index).ids) for t in traj.turns]
    flat, full = lengths["window:1"], lengths["full"]
    # only the feedback varies ("Moves left: N", and a note once the move hits a wall)
    assert max(flat[1:]) - min(flat[1:]) <= 32
    assert all(b > a for a, b in itertools.pairwise(full)) and full[-1] > 2 * max(flat)


def test_a_context_over_the_budget_ends_the_episode_truncated(served):
    server, codec = served
    script(server, codec, *MOVES)
    first = play(server, codec, build_env("sokoban", **SOKOBAN), History(2), turns=4)
    need = len(first.turn_samples()[1].context.ids)
    script(server, codec, *MOVES)
    traj = play(server, codec, build_env("sokoban", **SOKOBAN), History(2), turns=4, max_context_tokens=need)
    assert traj.status is Status.TRUNCATED and len(traj.turns) == 1
    assert all(len(s.tokens) <= need for s in traj.turn_samples())


def test_history_specs_and_turn_rewards():
    assert History.parse("full") == History() and History.parse(None).full
    assert History.parse("window:3") == History(3) and str(History(3)) == "window:3"
    assert list(History(2).kept(5)) == [3, 4] and list(History(0).kept(5)) == []
    for bad in ("window:-1", "window:x", "last:2", "window"):
        with pytest.raises(ValueError, match="full' or 'window:K"):
            History.parse(bad)
    steps = [0.0, 0.5, 1.0]
    assert turn_rewards(steps, 1.0, "episode", 0.9) == [1.0, 1.0, 1.0]
    assert turn_rewards(steps, 1.0, "step", 0.9) == steps
    assert turn_rewards(steps, 1.0, "return", 0.5) == pytest.approx([0.5, 1.0, 1.0])


def test_turn_reward_config_keeps_gamma_zero_and_refuses_what_is_not_a_discount():
    assert check_turn_reward() == ("episode", 1.0) and check_turn_reward("return", 0) == ("return", 0.0)
    assert check_turn_reward("step", 0.25) == ("step", 0.25)
    for bad in (float("nan"), float("inf"), -0.5, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match=r"gamma must be a number in \[0, 1\]"):
            check_turn_reward("return", bad)


def test_shaping_config_names_none_or_the_distance_and_needs_a_window():
    assert check_shaping(None, History(1), 8) is None and check_shaping("none", History(), 8) is None
    assert check_shaping("distance", History(0), 8) == PotentialShaping(unreachable=8)  # the turn cap
    for bad in ("potential", "off", False, True, 1, ["distance"]):
        with pytest.raises(ValueError, match="shaping must be one of none, distance"):
            check_shaping(bad, History(1), 8)
    with pytest.raises(ValueError, match="windowed history, not the full one"):
        check_shaping("distance", History(), 8)


def test_a_turn_cap_ends_no_episode_for_shaping_whoever_enforces_it(served):
    """The same two Sokoban turns, cut by the rollout's turn cap (TRUNCATED) or by the env's own (it says
    done, truncated: COMPLETED): the last state keeps its potential either way, so the terms agree."""
    server, codec = served
    shaping = PotentialShaping(unreachable=2)
    trajs = []
    for args in (None, SimpleNamespace(max_turns=2)):
        script(server, codec, *MOVES[:2])
        trajs.append(play(server, codec, build_env("sokoban", args=args, **SOKOBAN), History(1), turns=2))
    assert [t.status for t in trajs] == [Status.TRUNCATED, Status.COMPLETED] and trajs[1].turns[-1].truncated
    rollout_cap, env_cap = ([s.reward for s in t.turn_samples("step", 0.5, shaping)] for t in trajs)
    last = trajs[0].turns[-1]
    assert last.next_distance_to_goal not in (0, None)  # a potential of 0 would hide the difference
    assert rollout_cap == env_cap
    assert rollout_cap[-1] == 0.5 * -last.next_distance_to_goal + last.distance_to_goal


def test_turn_samples_refuse_a_nan_gamma(served):
    server, codec = served
    script(server, codec, *MOVES)
    traj = play(server, codec, build_env("sokoban", **SOKOBAN), History(1), turns=2)
    with pytest.raises(ValueError, match="gamma must be a number in"):
        traj.turn_samples("return", float("nan"))
    assert [s.reward for s in traj.turn_samples("return", 0.0)] == [t.reward for t in traj.turns]
