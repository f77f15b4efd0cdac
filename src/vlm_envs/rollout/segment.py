"""A run of an episode's response tokens."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Segment:
    """A run of response tokens: generated (trainable, with log probs) or an observation (neither)."""

    ids: tuple[int, ...]  # tuples of numbers leave the garbage collector's care; lists never do
    log_probs: tuple[float, ...] | None
    trainable: bool
