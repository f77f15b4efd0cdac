"""What one turn of an episode saw (:class:`Context`) and a windowed episode's training samples
(:class:`TurnSample`); :meth:`Trajectory.context <vlm_envs.rollout.trajectory.Trajectory.context>`
and :meth:`~vlm_envs.rollout.trajectory.Trajectory.turn_samples` make them."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np
import torch

from vlm_envs.rollout.codec import ChatCodec, ProcessedImage
from vlm_envs.rollout.images import train_inputs_of
from vlm_envs.rollout.segment import Segment


@dataclasses.dataclass(frozen=True)
class Context:
    """What the engine saw at one turn: ids (images expanded), engine ids, images, kept turns."""

    ids: tuple[int, ...]
    engine_ids: tuple[int, ...]
    images: list[ProcessedImage]
    turns: tuple[int, ...]


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

    def segment_texts(self, codec: ChatCodec) -> tuple[str, ...]:
        """The reply's text, special tokens included."""
        return (codec.decode(self.reply.ids, skip_special_tokens=False),)

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
