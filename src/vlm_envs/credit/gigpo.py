"""GiGPO's advantages (Group-in-Group Policy Optimization, arXiv 2505.10978), over plain turns.

Episodes of one *group* played the same task (env, config and seed) with the same policy. Each turn's
advantage is ``A = A_episode + step_weight * A_step``:

- ``A_episode``: the episode's return against its group's (``(R - mean) / std``), as GRPO's;
- ``A_step``: the turn's discounted return from its turn on (``R_t = sum_k gamma^(k-t) r_k``) against
  those of every turn in the group taken from the same state (equal :meth:`~vlm_envs.Env.state_key`, the
  *anchor state*), wherever in their episodes those turns were.

A group or anchor state of one member adds nothing (its advantage is 0), and a turn without a state key
joins no anchor group. ``scale="std"`` divides by the sample standard deviation (Bessel's, as
``torch.std`` and verl's GRPO) plus ``eps``; ``scale="mean"`` only subtracts the mean (the paper's
``F_norm = 1``).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Literal

Scale = Literal["std", "mean"]
SCALES: tuple[Scale, ...] = ("std", "mean")
#: The paper's defaults: the step-level term weighs as much as the episode's; returns discounted by 0.95.
STEP_WEIGHT, GAMMA, EPS = 1.0, 0.95, 1e-6


@dataclasses.dataclass(frozen=True)
class CreditTurn:
    """One turn of one episode, as GiGPO reads it.

    ``group``: the episodes compared with one another (one task, one policy); ``episode``: this turn's
    episode within it; ``state_key``: the state the turn acted from (``None``: not known);
    ``episode_return``: the episode's return; ``step_return``: the discounted return from this turn on
    (:func:`discounted_returns` of the episode's step rewards).
    """

    group: Hashable
    episode: Hashable
    state_key: str | None
    episode_return: float
    step_return: float


def discounted_returns(step_rewards: Sequence[float], gamma: float) -> list[float]:
    """``R_t = sum_k gamma^(k-t) r_k`` for every turn ``t`` of one episode."""
    out, running = [], 0.0
    for reward in reversed(step_rewards):
        running = reward + gamma * running
        out.append(running)
    return out[::-1]


def relative(values: Sequence[float], scale: Scale = "std", eps: float = EPS) -> list[float]:
    """Each value against its group's: ``value - mean``, divided by ``std + eps`` for ``scale="std"``;
    all 0 for a group of one (or of equal values)."""
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    n = len(values)
    if n < 2:
        return [0.0] * n
    mean = math.fsum(values) / n
    centred = [v - mean for v in values]
    if scale == "mean":
        return centred
    std = math.sqrt(math.fsum(c * c for c in centred) / (n - 1))
    return [0.0 if c == 0.0 else c / (std + eps) for c in centred]


def gigpo_advantages(
    turns: Sequence[CreditTurn],
    *,
    step_weight: float = STEP_WEIGHT,
    scale: Scale = "std",
    eps: float = EPS,
) -> list[float]:
    """Each turn's GiGPO advantage, in the order of ``turns`` (every turn of every episode of the batch,
    in any order; an episode's turns share its ``episode_return``)."""
    for value in (step_weight, eps):
        if not math.isfinite(value):
            raise ValueError(f"step_weight and eps must be finite, got {value!r}")
    episode_returns: dict[Hashable, dict[Hashable, float]] = defaultdict(dict)
    anchors: dict[tuple[Hashable, str], list[int]] = defaultdict(list)
    for i, turn in enumerate(turns):
        returns = episode_returns[turn.group]
        if returns.setdefault(turn.episode, turn.episode_return) != turn.episode_return:
            raise ValueError(f"episode {turn.episode!r} of group {turn.group!r} has two different returns")
        if turn.state_key is not None:
            anchors[turn.group, turn.state_key].append(i)
    episode_advantage: dict[tuple[Hashable, Hashable], float] = {}
    for group, returns in episode_returns.items():
        for episode, advantage in zip(returns, relative(list(returns.values()), scale, eps), strict=True):
            episode_advantage[group, episode] = advantage
    step_advantage = [0.0] * len(turns)
    for members in anchors.values():
        values = relative([turns[i].step_return for i in members], scale, eps)
        for i, advantage in zip(members, values, strict=True):
            step_advantage[i] = advantage
    return [
        episode_advantage[turn.group, turn.episode] + step_weight * step
        for turn, step in zip(turns, step_advantage, strict=True)
    ]
