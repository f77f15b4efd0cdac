"""Where the oracle's play of an env stands at every turn, played in this process: what every path's
records must repeat (the rollout's turn records, eval's results, the trainers' outputs)."""

from __future__ import annotations

from typing import Any

from vlm_envs import build_env
from vlm_envs.state_signals import action_optimal, standing_of

#: The fields every record gives each turn (:func:`vlm_envs.rollout.record.turn_standing`).
STANDING = ("state_key", "distance_to_goal", "next_distance_to_goal", "action_optimal")


def oracle_standings(env_name: str, seed: int | None, sample: Any = None, **env_config: Any) -> list[dict]:
    """Per oracle reply: the key and distance of the state it acted on, the distance after it, and
    whether it was optimal (the record fields of :func:`vlm_envs.rollout.record.turn_standing`)."""
    env = build_env(env_name, sample=sample, **env_config)
    try:
        env.reset(seed=seed)
        before, out, done = standing_of(env), [], False
        while not done:
            done = env.step(env.oracle_response())[1]
            after = standing_of(env)
            out.append(
                {
                    "state_key": before.key,
                    "distance_to_goal": before.distance,
                    "next_distance_to_goal": after.distance,
                    "action_optimal": action_optimal(before.distance, after.distance),
                }
            )
            before = after
        return out
    finally:
        env.close()
