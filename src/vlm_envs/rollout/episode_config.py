"""How one episode runs: its limits and options (:class:`EpisodeConfig`), resolved once at the edge."""

from __future__ import annotations

import dataclasses
from typing import Literal

from vlm_envs.rewards import check_reward
from vlm_envs.rollout.history import History


@dataclasses.dataclass(frozen=True)
class EpisodeConfig:
    """Limits and options of one episode, resolved once at the edge."""

    max_turns: int = 8
    #: Cap on prompt + response tokens (the context the engine must hold); ``None``: no cap.
    max_context_tokens: int | None = None
    #: Cap on response tokens (generated + observations), slime's ``rollout_max_response_len``.
    max_response_tokens: int | None = None
    #: Generated tokens per turn, unless ``sampling_params`` says ``max_new_tokens``.
    max_new_tokens: int = 1024
    #: Send one unexpanded image token per image to the engine (builds that expand images themselves).
    engine_placeholders: bool = False
    #: How images reach the engine: ``"data_uri"`` (PNG data URIs, for HTTP engines) or ``"pil"``
    #: (the resized PIL images themselves, for in-process engines such as verl's server manager).
    engine_images: Literal["data_uri", "pil"] = "data_uri"
    #: Compare the finished tokens with the template's rendering (cost grows with the episode).
    check_template: bool = False
    #: Reward of an episode that FAILED or was ABORTED.
    failure_reward: float = 0.0
    #: What the model sees of past turns: ``full``, or ``window:K`` (then each turn is a sample).
    history: History = dataclasses.field(default_factory=History)

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        object.__setattr__(self, "history", History.parse(self.history))
        object.__setattr__(self, "failure_reward", check_reward(self.failure_reward, "failure_reward"))
