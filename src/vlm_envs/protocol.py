"""The typed protocol every vlm-envs environment speaks.

An environment is a multi-turn conversation partner for a policy model: ``reset`` gives the first
observation, ``step`` takes the model's whole response text and answers with the next observation,
whether the episode is over, and a :class:`StepInfo`. ``format_observation`` turns an observation
into one chat message that a chat template can render.
"""

from __future__ import annotations

import abc
import asyncio
import random
from collections.abc import Mapping
from typing import Any, ClassVar, Literal, TypedDict

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["user", "tool"]
MetricValue = float | int | bool

#: Marks where an image goes inside ``Observation.text`` (the convention of slime's example envs).
IMAGE_PLACEHOLDER = "<image>"


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class ImagePart(TypedDict):
    type: Literal["image"]
    image: Image.Image


class ChatMessage(TypedDict):
    """One chat message as chat templates and processors take it."""

    role: str
    content: str | list[TextPart | ImagePart]


class Observation(BaseModel):
    """What the env shows the model: text, images and the chat role it arrives under.

    If ``text`` contains ``<image>`` placeholders there must be exactly one per image, and each
    image is shown where its placeholder stands; without placeholders the images come first.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    text: str = ""
    images: list[Image.Image] = Field(default_factory=list)
    role: Role = "user"
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _placeholders_match_images(self) -> Observation:
        n = self.text.count(IMAGE_PLACEHOLDER)
        if n and n != len(self.images):
            raise ValueError(
                f"text has {n} {IMAGE_PLACEHOLDER} placeholder(s) but the observation holds "
                f"{len(self.images)} image(s): give one placeholder per image, or none"
            )
        return self

    def parts(self) -> list[TextPart | ImagePart]:
        """Content parts in display order: ``{"type": "image", "image": PIL}`` and ``{"type": "text"}``."""
        if not self.text.count(IMAGE_PLACEHOLDER):
            parts: list[TextPart | ImagePart] = [{"type": "image", "image": im} for im in self.images]
            if self.text:
                parts.append({"type": "text", "text": self.text})
            return parts
        parts = []
        pieces = self.text.split(IMAGE_PLACEHOLDER)
        for i, piece in enumerate(pieces):
            if piece:
                parts.append({"type": "text", "text": piece})
            if i < len(self.images):
                parts.append({"type": "image", "image": self.images[i]})
        return parts

    def to_dict(self) -> dict[str, Any]:
        """The dict shape of slime's example envs: ``{"obs_str", "multi_modal_data"}``."""
        data: dict[str, Any] = {"obs_str": self.text, "role": self.role}
        if self.images:
            data["multi_modal_data"] = {IMAGE_PLACEHOLDER: list(self.images)}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], role: Role | None = None) -> Observation:
        """Inverse of :meth:`to_dict`; also accepts dicts without ``role`` (slime's examples)."""
        images = list((data.get("multi_modal_data") or {}).get(IMAGE_PLACEHOLDER, []))
        return cls(text=data.get("obs_str", ""), images=images, role=role or data.get("role", "user"))


class StepInfo(BaseModel):
    """What one step produced besides the observation."""

    model_config = ConfigDict(extra="forbid")

    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    metrics: dict[str, MetricValue] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


class EpisodeFinishedError(RuntimeError):
    """``step`` was called after the episode ended; call ``reset`` first."""


class Env(abc.ABC):
    """Base class of every environment.

    Subclasses implement :meth:`reset`, :meth:`step` and :meth:`episode_reward`; the rest has
    defaults. ``spec`` is set by :func:`vlm_envs.build_env` and lets the env be rebuilt elsewhere.
    """

    #: One-line description shown by ``vlm-envs list`` (defaults to the first docstring line).
    description: ClassVar[str] = ""
    spec: Any = None

    @abc.abstractmethod
    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start an episode; the same seed and config give the same episode in any process."""

    @abc.abstractmethod
    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer the model's whole response; raise :class:`EpisodeFinishedError` after the end."""

    @abc.abstractmethod
    def episode_reward(self) -> float:
        """The scalar a trainer uses for the episode so far."""

    def system_prompt(self) -> str | None:
        """A system message the conversation should start with, if the env wants one."""
        return None

    def format_observation(self, obs: Observation) -> ChatMessage:
        """One chat message; a tool observation becomes a ``tool`` message."""
        return {"role": obs.role, "content": obs.parts()}

    def random_response(self, rng: random.Random) -> str:
        """A plausible response for fuzzing, checking and the ``random`` policy."""
        return rng.choice(["", "I am not sure.", "<answer>?</answer>"])

    def close(self) -> None:
        """Release resources; calling it twice is fine."""

    async def areset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """:meth:`reset` off the event loop."""
        return await asyncio.to_thread(self.reset, seed)

    async def astep(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """:meth:`step` off the event loop."""
        return await asyncio.to_thread(self.step, response_text)


def resolve_env_config(sample: Any = None, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per-sample config from ``sample.metadata["env_config"]``, overridden by explicit ``config``.

    ``sample`` is anything with a ``metadata`` mapping (slime's ``Sample``) or a plain dict row.
    """
    metadata = sample.get("metadata") if isinstance(sample, Mapping) else getattr(sample, "metadata", None)
    env_config = (metadata or {}).get("env_config") or {}
    if not isinstance(env_config, Mapping):
        raise TypeError(f"sample.metadata['env_config'] must be a mapping, got {type(env_config).__name__}")
    return {**env_config, **(config or {})}


def args_max_turns(args: Any, default: int | None = None) -> int | None:
    """``args.max_turns`` from slime's args (set by its ``--custom-config-path`` YAML), if given."""
    value = getattr(args, "max_turns", None)
    return int(value) if value is not None else default
