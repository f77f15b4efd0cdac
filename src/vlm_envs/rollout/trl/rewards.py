"""Reward functions for ``GRPOTrainer``: the env's episode reward, and its metrics as TRL metrics.

TRL calls a reward function with the prompts, the completions and every other field of the batch
as keyword arguments; the rollout puts each episode's record under ``vlm_envs``. TRL turns a
``None`` reward into NaN and gives a completion whose every reward is NaN no advantage: a failed or
aborted episode (and one whose env has no episode reward, left to the user's own reward
functions) gets ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from vlm_envs.metrics import metric_means
from vlm_envs.rollout.record import RECORD_KEY
from vlm_envs.rollout.trajectory import Status

#: Prefix of the metrics this module logs (TRL shows them beside its own: ``vlm_envs/success``).
METRIC_PREFIX = "vlm_envs/"
_NO_ADVANTAGE = frozenset({Status.FAILED.value, Status.ABORTED.value})


def reward_of(record: Mapping[str, Any] | None) -> float | None:
    """The episode's reward for TRL: ``None`` for a failed or aborted episode, or an env without one."""
    if not record or record.get("status") in _NO_ADVANTAGE or record.get("reward") is None:
        return None
    return float(record["reward"])


def episode_metrics(records: Sequence[Mapping[str, Any] | None]) -> dict[str, float]:
    """Means over the batch's episodes: the env's metrics at the last turn (a missing one counts
    as 0, :mod:`vlm_envs.metrics`), turns played, and the share of each status."""
    records = [r or {} for r in records]
    if not records:
        return {}
    out = metric_means(r.get("metrics") for r in records)
    out["num_turns"] = sum(int(r.get("num_turns") or 0) for r in records) / len(records)
    for status in Status:
        out[f"status/{status.value}"] = sum(r.get("status") == status.value for r in records) / len(records)
    return out


def episode_reward(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    log_metric: Callable[[str, float], None] | None = None,
    **kwargs: Any,
) -> list[float | None]:
    """The env's episode reward of each completion (see the module doc); logs the episodes' metrics
    through TRL's ``log_metric`` as ``vlm_envs/NAME``."""
    records = kwargs.get(RECORD_KEY) or [None] * len(prompts)
    if log_metric is not None:
        for name, value in episode_metrics(records).items():
            log_metric(METRIC_PREFIX + name, value)
    return [reward_of(record) for record in records]
