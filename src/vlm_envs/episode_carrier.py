"""Which episode a chat prompt stands for, carried inside the prompt itself.

TRL's ``GRPOTrainer`` hands a rollout function the dataset's prompts and nothing else (no other
column), so a row's env, seed and env config travel in its prompt: under :data:`CARRIER_KEY` on one
of its messages (``make-dataset --trainer trl`` puts it on the first), as a JSON string. A string
has one type whatever the env's config holds, so a parquet column of messages keeps one schema
across rows and envs. Chat templates read a message's ``role`` and ``content`` only, so the carrier
never reaches the model; TRL keeps a message's other keys when it puts images into the prompt. The
dataset's other columns stay the user's: TRL hands them to the reward functions as it always does.

This module is torch-free: the dataset writer and the TRL rollout both use it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from vlm_envs.protocol import check_seed

#: The message key that carries the episode (the same name as the trainer hooks' record key).
CARRIER_KEY = "vlm_envs"
HOW_TO_CARRY = (
    "give the prompt's first message a 'vlm_envs' key (vlm_envs.episode_carrier.attach, or "
    "`vlm-envs make-dataset ENV --trainer trl`, which writes such rows)"
)


@dataclasses.dataclass(frozen=True)
class EpisodeSpec:
    """The episode a row names: the env, its seed and config, and optionally a turn cap and history."""

    env: str
    seed: int | None = None
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    max_turns: int | None = None
    history: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.env, str) or not self.env:
            raise ValueError(f"an episode needs an env name, got {self.env!r}")
        check_seed(self.seed)
        if not isinstance(self.env_config, Mapping):
            raise ValueError(f"env_config must be a mapping, got {type(self.env_config).__name__}")
        if self.max_turns is not None and (type(self.max_turns) is not int or self.max_turns < 1):
            raise ValueError(f"max_turns must be a positive int, got {self.max_turns!r}")

    def to_json(self) -> str:
        """The carrier's value: compact JSON, keys sorted, empty fields left out."""
        data: dict[str, Any] = {"env": self.env, "seed": self.seed}
        if self.env_config:
            data["env_config"] = dict(self.env_config)
        if self.max_turns is not None:
            data["max_turns"] = self.max_turns
        if self.history is not None:
            data["history"] = self.history
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> EpisodeSpec:
        """Read a carrier value; ``ValueError`` saying what is wrong with it."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as err:
            raise ValueError(f"the {CARRIER_KEY!r} carrier is not JSON: {str(text)[:80]!r}") from err
        if not isinstance(data, dict):
            raise ValueError(f"the {CARRIER_KEY!r} carrier must be a JSON object, got {str(text)[:80]!r}")
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"the {CARRIER_KEY!r} carrier has unknown keys {sorted(unknown)}")
        try:
            return cls(**{**data, "env_config": data.get("env_config") or {}})
        except (TypeError, ValueError) as err:
            raise ValueError(f"the {CARRIER_KEY!r} carrier is invalid: {err}") from err


def attach(messages: Sequence[Mapping[str, Any]], spec: EpisodeSpec) -> list[dict[str, Any]]:
    """``messages`` (copied) with ``spec`` carried on the first one."""
    if not messages:
        raise ValueError("a prompt needs at least one message to carry its episode")
    out = [dict(m) for m in messages]
    out[0][CARRIER_KEY] = spec.to_json()
    return out


def find(messages: Any) -> EpisodeSpec | None:
    """The episode carried by the first message that has a non-empty carrier, or ``None``.

    ``ValueError`` for a carrier that is there but malformed.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    for message in messages:
        value = message.get(CARRIER_KEY) if isinstance(message, Mapping) else None
        if value:
            return EpisodeSpec.from_json(value)
    return None


def strip(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` without the carrier key (what a chat template should see)."""
    return [{k: v for k, v in m.items() if k != CARRIER_KEY} for m in messages]
