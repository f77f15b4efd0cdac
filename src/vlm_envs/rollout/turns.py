"""The context each turn of an episode saw, and windowed episodes' turn samples.

A turn's context is the token list the engine continued: for ``window:K`` (K >= 1) the prompt and
then, for each kept past turn, its generated ids and the observation delta that answered them (the
template's own rendering of those messages, spliced as the full history splices them); for
``window:0`` the prompt without its generation prompt and the current observation rendered right
after it. Consecutive contexts share the prompt (and, until the window is full, everything after).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from vlm_envs.rollout.codec import ProcessedImage
from vlm_envs.rollout.history import TurnReward, turn_rewards
from vlm_envs.rollout.images import train_inputs_of

if TYPE_CHECKING:
    from vlm_envs.rollout.trajectory import Segment, Trajectory


@dataclasses.dataclass(frozen=True)
class Context:
    """What the engine saw at one turn: ids (images expanded), engine ids, images, kept turns."""

    ids: tuple[int, ...]
    engine_ids: tuple[int, ...]
    images: list[ProcessedImage]
    turns: tuple[int, ...]


def context_of(traj: Trajectory, turn: int) -> Context:
    """The context of ``turn`` (0-based) under the trajectory's history policy."""
    history = traj.history
    if turn == 0:
        return Context(traj.prompt.ids, traj.prompt.engine_ids, list(traj.prompt.images), ())
    if history.window == 0:
        head, follow = traj.head, traj.turns[turn - 1].follow
        if head is None or follow is None:
            raise ValueError(
                f"turn {turn} has no window:0 context (the observation before it was not encoded)"
            )
        return Context(
            head.ids + follow.ids, head.engine_ids + follow.engine_ids, [*head.images, *follow.images], ()
        )
    kept = tuple(history.kept(turn))
    ids, engine_ids, images = [traj.prompt.ids], [traj.prompt.engine_ids], list(traj.prompt.images)
    for j in kept:
        record = traj.turns[j]
        if record.reply is None or record.delta is None:
            raise ValueError(f"turn {turn} has no context: turn {j} left no observation")
        ids += [record.reply.ids, record.delta.ids]
        engine_ids += [record.reply.ids, record.delta.engine_ids]
        images += record.delta.images
    return Context(_join(ids), _join(engine_ids), images, kept)


def _join(parts: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(t for part in parts for t in part)


@dataclasses.dataclass(frozen=True)
class TurnSample:
    """One turn as a training sample: the context the engine saw as prompt, the reply as response."""

    turn: int
    context: Context
    reply: Segment
    reward: float

    @property
    def prompt_ids(self) -> list[int]:
        return list(self.context.ids)

    @property
    def segments(self) -> list[Segment]:
        return [self.reply]

    @property
    def response_ids(self) -> list[int]:
        return list(self.reply.ids)

    @property
    def tokens(self) -> list[int]:
        return [*self.context.ids, *self.reply.ids]

    @property
    def response_length(self) -> int:
        return len(self.reply.ids)

    @property
    def loss_mask(self) -> list[int]:
        return [1] * len(self.reply.ids)

    @property
    def log_probs(self) -> list[float]:
        return list(self.reply.log_probs or ())

    @property
    def images(self) -> list[ProcessedImage]:
        return self.context.images

    def train_inputs(self) -> dict[str, torch.Tensor]:
        """``pixel_values`` and ``image_grid_thw`` of the context's images, in token order, or ``{}``
        (made on the first call and kept: call it off the event loop first)."""
        return self._train_inputs

    @functools.cached_property
    def _train_inputs(self) -> dict[str, torch.Tensor]:
        return train_inputs_of(self.context.images)


def make_train_inputs(samples: Sequence[TurnSample]) -> None:
    """Make the samples' training tensors in one pass: an image shared by several contexts is made
    once and copied to the others (a windowed episode shows most frames in K + 1 samples)."""
    placed: dict[int, np.ndarray] = {}
    for sample in samples:
        if "_train_inputs" not in sample.__dict__:
            sample.__dict__["_train_inputs"] = train_inputs_of(sample.context.images, placed)


def turn_samples(traj: Trajectory, reward: TurnReward = "episode", gamma: float = 1.0) -> list[TurnSample]:
    """One sample per turn that generated tokens. Rewards: the episode's on every turn, the
    discounted return from the turn, or the step reward; an episode that FAILED or was ABORTED
    gives every turn its (failure) reward."""
    records = [r for r in traj.turns if r.reply is not None]
    if traj.status.value in ("failed", "aborted"):
        rewards = [traj.reward] * len(records)
    else:
        rewards = turn_rewards([r.reward for r in records], traj.reward, reward, gamma)
    return [
        TurnSample(r.index, context_of(traj, r.index), r.reply, value)
        for r, value in zip(records, rewards, strict=True)
        if r.reply.ids
    ]
