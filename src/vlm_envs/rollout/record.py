"""What every trainer hook writes back about its episode (what a row names: :mod:`vlm_envs.rollout.rows`).

:func:`episode_record` is the JSON-friendly record of a finished episode that the hooks hand back
under :data:`RECORD_KEY` (slime's ``sample.metadata["vlm_envs"]``, verl's
``extra_fields["vlm_envs"]``). Trainer-neutral: this module knows no trainer.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vlm_envs.rollout.trajectory import Trajectory

#: Where the hooks put :func:`episode_record` (slime: ``sample.metadata``; verl: ``extra_fields``).
RECORD_KEY = "vlm_envs"


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
            }
            for t in traj.turns
        ],
        "template_check": None if traj.template_check is None else traj.template_check.ok,
        # a resumed episode: the turns and tokens it kept from before its abort (none generated again)
        "resumed": None if traj.kept is None else dataclasses.asdict(traj.kept),
        "reset_info": {k: v for k, v in traj.reset_info.items() if isinstance(v, str | int | float | bool)},
    }
