"""Potential-based shaping from the distance to the goal (Ng, Harada and Russell 1999).

Each turn's reward gains ``F = gamma * phi(s') - phi(s)`` with ``phi = -distance_to_goal``: a turn that
brings the goal one turn nearer earns about 1, one that leads away about -1. Over an episode the terms add
up to ``gamma^T phi(s_T) - phi(s_0)``, which no choice of actions after the first state changes, so the
best policy stays the best (the shaping is *policy-invariant*): it speeds learning without changing what is
learned. What each potential is:

- a state the goal is ``d`` turns from: ``-d`` (``0`` once solved);
- a state after the last turn when that turn *ended* the episode (the env said done: solved, lost, or
  answered): ``0``, as the theory's absorbing state (a lost episode is then told so by its own reward,
  not the shaping); a turn cap (a time limit, the env's or the rollout's) ends nothing: the state keeps
  its potential;
- a state from which the goal cannot be reached (:data:`~vlm_envs.state_signals.UNREACHABLE`) while the
  episode goes on: ``-unreachable``, a constant of the run (the hooks use the episode's turn cap);
- a state whose distance the env does not know (``None``): the turns that start or end there get no term.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from vlm_envs.state_signals import UNREACHABLE


def potential(distance: int | None, unreachable: float) -> float | None:
    """``phi`` of a state ``distance`` turns from the goal (see the module)."""
    if distance is None:
        return None
    return -float(unreachable) if distance == UNREACHABLE else -float(distance)


def shaping_terms(
    distances: Sequence[int | None],
    next_distances: Sequence[int | None],
    ended: bool,
    gamma: float,
    unreachable: float,
) -> list[float]:
    """``gamma * phi(s') - phi(s)`` for each turn of one episode, from the distance before each turn and
    after it; ``ended``: the last turn ended the episode (its next state's potential is 0)."""
    if len(distances) != len(next_distances):
        raise ValueError(f"{len(distances)} distances before the turns but {len(next_distances)} after")
    terms = []
    for t, (before, after) in enumerate(zip(distances, next_distances, strict=True)):
        phi = potential(before, unreachable)
        phi_next = 0.0 if ended and t == len(distances) - 1 else potential(after, unreachable)
        terms.append(0.0 if phi is None or phi_next is None else gamma * phi_next - phi)
    return terms


@dataclasses.dataclass(frozen=True)
class PotentialShaping:
    """Shaping turn rewards with :func:`shaping_terms`; ``unreachable``: the distance a state the goal
    cannot be reached from counts as (a constant of the run, e.g. its turn cap)."""

    unreachable: float

    def __post_init__(self) -> None:
        if isinstance(self.unreachable, bool) or not math.isfinite(self.unreachable) or self.unreachable < 0:
            raise ValueError(f"unreachable must be a finite number >= 0, got {self.unreachable!r}")

    def terms(
        self, distances: Sequence[int | None], next_distances: Sequence[int | None], ended: bool, gamma: float
    ) -> list[float]:
        """Each turn's shaping term (:func:`shaping_terms`)."""
        return shaping_terms(distances, next_distances, ended, gamma, self.unreachable)
