"""Stand-in for ``slime.utils.types.Sample`` (slime itself cannot be installed here).

It follows the real contract field by field (``slime/utils/types.py``): the same dataclass fields and
``Status`` values, and ``append_response_tokens`` with slime's checks: trainable tokens need log
probs, observation tokens must not pass any, loss mask and log probs stay as long as the response.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any


@dataclass
class Sample:
    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, Any]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    remove_sample: bool = False

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    status: Status = Status.PENDING
    metadata: dict = field(default_factory=dict)
    train_metadata: dict | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0

    def append_response_tokens(
        self,
        args: Any = None,
        *,
        tokens: list[int] | None = None,
        log_probs: list[float] | None = None,
        trainable: bool = True,
        meta_info: dict | None = None,
        text: str | None = None,
        update_terminal_info: bool = True,
    ) -> None:
        tokens = [int(t) for t in tokens or []]
        log_probs = None if log_probs is None else [float(v) for v in log_probs]
        if log_probs is not None and len(log_probs) != len(tokens):
            raise ValueError(f"log_probs length {len(log_probs)} != tokens length {len(tokens)}")
        if tokens and trainable and log_probs is None:
            raise ValueError("trainable response tokens require rollout log probabilities.")
        if tokens and not trainable:
            if log_probs is not None:
                raise ValueError("non-trainable response tokens should not pass rollout log probabilities.")
            log_probs = [0.0] * len(tokens)
        previous = self.response_length
        if text is not None:
            self.response += text
        if tokens:
            self.tokens += tokens
            self.response_length += len(tokens)
            if self.loss_mask is None:
                self.loss_mask = [1] * previous
            self.loss_mask += [1 if trainable else 0] * len(tokens)
        if log_probs is not None:
            if self.rollout_log_probs is None:
                if trainable and previous:
                    raise ValueError("existing response tokens have no rollout_log_probs")
                self.rollout_log_probs = [0.0] * previous
            self.rollout_log_probs += log_probs
        if meta_info and update_terminal_info and "finish_reason" in meta_info:
            self.status = {
                "length": Sample.Status.TRUNCATED,
                "abort": Sample.Status.ABORTED,
                "stop": Sample.Status.COMPLETED,
            }.get(meta_info["finish_reason"]["type"], self.status)
        if self.loss_mask is not None and len(self.loss_mask) != self.response_length:
            raise ValueError(
                f"loss_mask length {len(self.loss_mask)} != response_length {self.response_length}"
            )
        if self.rollout_log_probs is not None and len(self.rollout_log_probs) != self.response_length:
            raise ValueError("rollout_log_probs length != response_length")


class LegacySample(Sample):
    """An older slime Sample without ``append_response_tokens`` (the hook fills fields directly)."""

    def __getattribute__(self, name: str) -> Any:
        if name == "append_response_tokens":
            raise AttributeError(name)
        return super().__getattribute__(name)
