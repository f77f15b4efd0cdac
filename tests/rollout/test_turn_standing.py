"""The rollout records where every turn stood, as the env says it in this process: the key and distance
of the state each reply acted on, the distance after it, and whether it was optimal; an env whose
signals are malformed ends its episode FAILED, saying so."""

from __future__ import annotations

import asyncio

from rollout_helpers import SOKOBAN, script
from standing_helpers import oracle_standings
from toyenvs.colors import StatedColorsEnv

from vlm_envs import build_env
from vlm_envs.rollout.engines.sglang import SGLangEngine
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.record import episode_record, turn_standing
from vlm_envs.rollout.trajectory import Status, Trajectory
from vlm_envs.state_signals import UNREACHABLE

SEED = 4


def play(server, codec, env, max_turns: int = 6) -> Trajectory:
    async def main() -> Trajectory:
        async with SGLangEngine(server.url) as engine:
            config = EpisodeConfig(max_turns=max_turns, max_new_tokens=48)
            return await run_episode(env, engine, codec, seed=SEED, config=config, sampling_params={})

    return asyncio.run(main())


def test_the_oracles_turns_record_the_envs_own_standing(served):
    server, codec = served
    env = build_env("sokoban", **SOKOBAN)
    expected = oracle_standings("sokoban", SEED, **SOKOBAN)
    env.reset(seed=SEED)
    replies = []
    while not env.step(reply := env.oracle_response())[1]:
        replies.append(reply)
    script(server, codec, *replies, reply)
    traj = play(server, codec, build_env("sokoban", **SOKOBAN))
    assert traj.status is Status.COMPLETED
    assert [turn_standing(t) for t in traj.turns] == expected
    assert [t["action_optimal"] for t in episode_record(traj, "slime")["turns"]] == [True] * len(expected)


def test_replies_that_change_nothing_are_not_optimal_and_the_record_says_where_they_stood(served):
    server, codec = served
    env = build_env("sokoban", **SOKOBAN)
    env.reset(seed=SEED)
    key, distance = env.state_key(), env.distance_to_goal()
    moves = ["<answer>Up, Up, Up, Up, Up</answer>", "<answer>Down</answer>"]
    after = []
    for move in moves:
        env.step(move)
        after.append(env.distance_to_goal())
    script(server, codec, *moves)
    traj = play(server, codec, build_env("sokoban", **SOKOBAN), max_turns=2)
    first, second = traj.turns
    assert (first.state_key, first.distance_to_goal) == (key, distance)
    assert [first.next_distance_to_goal, second.next_distance_to_goal] == after
    assert second.distance_to_goal == first.next_distance_to_goal
    # neither reply changed the state (five moves are more than a turn takes; Down is blocked)
    assert after == [distance, distance] and first.action_optimal is second.action_optimal is False
    assert second.state_key == first.state_key


class _IntKeyed(StatedColorsEnv):
    def state_key(self) -> str | None:  # type: ignore[override]
        return 7  # type: ignore[return-value]


class _BelowUnreachable(StatedColorsEnv):
    def distance_to_goal(self) -> int | None:
        return UNREACHABLE - 1


def test_malformed_signals_fail_the_episode_with_the_reason(served):
    server, codec = served
    script(server, codec, "<answer>red</answer>")
    traj = play(server, codec, _IntKeyed())
    assert traj.status is Status.FAILED and "state_key() returned a int" in traj.error
    script(server, codec, "<answer>red</answer>", "<answer>blue</answer>")
    traj = play(server, codec, _BelowUnreachable())
    assert traj.status is Status.FAILED and "distance_to_goal() returned -2" in traj.error
