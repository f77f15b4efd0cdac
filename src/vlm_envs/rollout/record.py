"""What every trainer hook writes back about its episode (what a row names: :mod:`vlm_envs.rollout.rows`).

:func:`episode_record` is the JSON-friendly record of a finished episode that the hooks hand back
under :data:`RECORD_KEY` (slime's ``sample.metadata["vlm_envs"]``, verl's
``extra_fields["vlm_envs"]``). Trainer-neutral: this module knows no trainer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vlm_envs.rollout.trajectory import STANDING_FIELDS, Trajectory, TurnRecord
from vlm_envs.rollout.turns import TurnSample

#: Where the hooks put :func:`episode_record` (slime: ``sample.metadata``; verl: ``extra_fields``).
RECORD_KEY = "vlm_envs"


_STANDING_KEYS = (*STANDING_FIELDS, "action_optimal")


def turn_standing(turn: TurnRecord) -> dict[str, Any]:
    """Where ``turn``'s reply stood (:mod:`vlm_envs.state_signals`): the state's key and distance to the
    goal before it, the distance after it, and whether it lowered the distance by one."""
    return {
        **{field: getattr(turn, field) for field in STANDING_FIELDS},
        "action_optimal": turn.action_optimal,
    }


def turn_record(record: dict[str, Any], turn: TurnSample) -> dict[str, Any]:
    """The record of one turn's sample (a windowed episode's): the episode's ``record``, which turn this
    is, the past turns its context held, and where the turn stood (:func:`turn_standing`)."""
    standing = {key: record["turns"][turn.turn][key] for key in _STANDING_KEYS}
    return {**record, "turn": turn.turn, "context_turns": list(turn.context.turns), **standing}


def response_turns(data: Trajectory | TurnSample) -> list[list[int]]:
    """Where each turn's reply lies in the response of ``data`` (a whole episode, or one turn's sample):
    ``[turn, start, end]`` per reply, in response order (the tokens ``start:end``). A reply the response
    does not hold (a discarded response) has none."""
    if isinstance(data, TurnSample):
        return [[data.turn, 0, len(data.reply.ids)]] if data.reply.ids else []
    starts, at = {}, 0
    for segment in data.segments:
        starts[id(segment)] = at
        at += len(segment.ids)
    spans = []
    for turn in data.turns:
        start = starts.get(id(turn.reply)) if turn.reply is not None and turn.reply.ids else None
        if start is not None:
            spans.append([turn.index, start, start + len(turn.reply.ids)])
    return sorted(spans, key=lambda span: span[1])


def episode_record(traj: Trajectory, trainer: str) -> dict[str, Any]:
    """The record of a finished episode: JSON-friendly, no images or tensors.

    ``trainer`` names who scores an episode whose env has no episode reward (``reward_source``).
    """
    last_metrics = traj.turns[-1].metrics if traj.turns else {}
    return {
        "status": traj.status.value,
        "error": traj.error,
        "reward": traj.reward if traj.reward_from_env else None,
        # the trainer's own reward model scores an env without an episode reward
        "reward_source": "env" if traj.reward_from_env else trainer,
        "prompt_source": traj.prompt_source,
        "history": str(traj.history),
        "num_turns": len(traj.turns),
        "metrics": dict(last_metrics),
        "reward_breakdown": {
            "episode_reward": traj.reward if traj.reward_from_env else None,
            "step_rewards": [t.reward for t in traj.turns],
        },
        "turns": [
            {
                "finish_reason": t.finish_reason,
                "generated_tokens": t.generated_tokens,
                "observation_tokens": t.observation_tokens,
                "reward": t.reward,
                "done": t.done,
                "metrics": dict(t.metrics),
                "timings": dict(t.timings),
                **turn_standing(t),
            }
            for t in traj.turns
        ],
        "template_check": None if traj.template_check is None else traj.template_check.ok,
        # a resumed episode: the turns and tokens it kept from before its abort (none generated again)
        "resumed": None if traj.kept is None else dataclasses.asdict(traj.kept),
        "reset_info": {k: v for k, v in traj.reset_info.items() if isinstance(v, str | int | float | bool)},
    }
