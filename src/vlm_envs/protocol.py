"""The typed protocol every vlm-envs environment speaks.

An environment is a multi-turn conversation partner for a policy model: ``reset`` gives the first
observation, ``step`` takes the model's whole response text and answers with the next observation,
whether the episode is over, and a :class:`StepInfo`. ``format_observation`` turns an observation
into one chat message that a chat template can render.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import inspect
import numbers
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypedDict

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, model_validator

from vlm_envs.snapshot import Snapshots, recorder_of
from vlm_envs.state_signals import StateSignals

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

    ``text`` is literal: a ``<image>`` inside it is plain text, never an image slot, so an env that
    quotes a model's reply cannot have a slot forged or broken. Images are shown first, unless
    ``image_slots`` places them: one offset into ``text`` per image, in order. Build interleaved
    observations with :meth:`compose`.
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, extra="forbid")

    text: str = ""
    images: list[Image.Image] = Field(default_factory=list)
    role: Role = "user"
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: Where each image stands: character offsets into ``text``, non-decreasing; empty: images first.
    image_slots: tuple[int, ...] = ()

    @model_validator(mode="after")
    def _slots_fit(self) -> Observation:
        slots = self.image_slots
        if not slots:
            return self
        if len(slots) != len(self.images):
            raise ValueError(
                f"{len(slots)} image slot(s) for {len(self.images)} image(s): give one slot per image, "
                "or none (images first); Observation.compose(...) places them for you"
            )
        if any(
            not 0 <= a <= b <= len(self.text)
            for a, b in zip(slots, (*slots[1:], len(self.text)), strict=True)
        ):
            raise ValueError(f"image slots {slots} must be non-decreasing offsets within the text")
        return self

    @classmethod
    def compose(
        cls, *pieces: str | Image.Image, role: Role = "user", metadata: Mapping[str, Any] | None = None
    ) -> Observation:
        """An observation from pieces in display order: strings are literal text, images stand where
        they are (``Observation.compose("Board:", frame, "Moves left: 3")``)."""
        text: list[str] = []
        images: list[Image.Image] = []
        slots: list[int] = []
        length = 0
        for piece in pieces:
            if isinstance(piece, Image.Image):
                images.append(piece)
                slots.append(length)
            elif isinstance(piece, str):
                text.append(piece)
                length += len(piece)
            else:
                raise TypeError(f"compose() takes strings and PIL images, not {type(piece).__name__}")
        return cls(
            text="".join(text),
            images=images,
            role=role,
            metadata=dict(metadata or {}),
            image_slots=tuple(slots),
        )

    @property
    def is_empty(self) -> bool:
        """No text (beyond whitespace) and no images: slime-shaped envs' "the question is in the prompt"."""
        return not self.images and not self.text.strip()

    def parts(self) -> list[TextPart | ImagePart]:
        """Content parts in display order: ``{"type": "image", "image": PIL}`` and ``{"type": "text"}``."""
        slots = self.image_slots or (0,) * len(self.images)
        parts: list[TextPart | ImagePart] = []
        start = 0
        for slot, image in zip(slots, self.images, strict=True):
            if slot > start:
                parts.append({"type": "text", "text": self.text[start:slot]})
            parts.append({"type": "image", "image": image})
            start = slot
        if start < len(self.text):
            parts.append({"type": "text", "text": self.text[start:]})
        return parts

    def to_dict(self) -> dict[str, Any]:
        """The dict shape of slime's example envs: ``{"obs_str", "multi_modal_data"}``, with a
        ``<image>`` placeholder where each image stands."""
        text = "".join(
            IMAGE_PLACEHOLDER if p["type"] == "image" else p["text"]  # type: ignore[typeddict-item]
            for p in self.parts()
        )
        data: dict[str, Any] = {"obs_str": text, "role": self.role}
        if self.images:
            data["multi_modal_data"] = {IMAGE_PLACEHOLDER: list(self.images)}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], role: Role | None = None) -> Observation:
        """Inverse of :meth:`to_dict`; also accepts dicts without ``role`` (slime's examples).
        Placeholders are read as :meth:`with_placeholders` reads them."""
        images = list((data.get("multi_modal_data") or {}).get(IMAGE_PLACEHOLDER, []))
        return cls.with_placeholders(
            str(data.get("obs_str") or ""), images, role=role or data.get("role") or "user"
        )

    @classmethod
    def with_placeholders(
        cls,
        text: str,
        images: Sequence[Image.Image],
        role: Role = "user",
        metadata: Mapping[str, Any] | None = None,
    ) -> Observation:
        """An observation from trusted text with ``<image>`` placeholders (dataset rows, slime dicts).

        Placeholders become slots when there is one per image; otherwise the text stays literal and
        the images come first. Never pass text a model wrote through here: use :meth:`compose`.
        """
        images = list(images)
        pieces = text.split(IMAGE_PLACEHOLDER)
        if images and len(pieces) == len(images) + 1:
            interleaved: list[str | Image.Image] = [pieces[0]]
            for image, piece in zip(images, pieces[1:], strict=True):
                interleaved += [image, piece]
            return cls.compose(*interleaved, role=role, metadata=metadata)
        return cls(text=text, images=images, role=role, metadata=dict(metadata or {}))


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


#: Seeds are gymnasium's domain, bounded to what numpy and trainers store: ints in [0, 2**64).
SEED_LIMIT = 1 << 64


def check_seed(seed: Any) -> int | None:
    """``seed`` as an int in ``[0, 2**64)`` or ``None``; anything else raises (never aliased)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be None or an int in [0, 2**64), got {type(seed).__name__} {seed!r:.40}")
    value = int(seed)
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(f"seed must be an int in [0, 2**64), got {value}")
    return value


def check_response_text(response: Any) -> str:
    """``response`` if it is a ``str``; anything else (``None``, bytes, numbers, lists) raises
    ``TypeError`` naming its type: a reply is the model's decoded text, never guessed from another type."""
    if not isinstance(response, str):
        raise TypeError(f"a reply must be a str (the model's decoded text), got {type(response).__name__}")
    return response


class Env(Snapshots[Observation], StateSignals, abc.ABC):
    """Base class of every environment.

    Subclasses implement :meth:`reset`, :meth:`step` and :meth:`episode_reward`; the rest has
    defaults. ``spec`` is set by :func:`vlm_envs.build_env` and lets the env be rebuilt elsewhere.

    The protocol guards the door for every subclass: before a subclass's ``reset`` runs, ``seed``
    is checked (:func:`check_seed`) and ``options`` must be a mapping; before its ``step`` runs, a
    reply that is not a ``str`` is refused with ``TypeError`` (:func:`check_response_text`). The
    guards also record the episode's seed, options and replies, which give every seed-exact env
    ``snapshot()`` and ``restore()`` (:class:`vlm_envs.snapshot.Snapshots`). Where the episode stands,
    ``state_key()``, ``state_text()`` and ``distance_to_goal()``, is ``None`` unless the env says
    (:class:`vlm_envs.state_signals.StateSignals`).
    """

    #: One-line description shown by ``vlm-envs list`` (defaults to the first docstring line).
    description: ClassVar[str] = ""
    #: Whether :meth:`episode_reward` is the episode's reward; ``False`` leaves it to the trainer's
    #: own reward model (slime-shaped envs, whose reward slime's ``--custom-rm-path`` computes).
    has_episode_reward: ClassVar[bool] = True
    spec: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, guard in _GUARDS.items():
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_guarded", False):
                setattr(cls, name, guard(method))

    @abc.abstractmethod
    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Start an episode; the same seed, options and config give the same episode in any process.

        ``options`` may pick the episode (a level, a problem id, a difficulty); an env that takes
        none may leave the parameter out.
        """

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
        """A plausible response for fuzzing, checking and the ``random`` policy; draw only from ``rng``."""
        return rng.choice(["", "I am not sure.", "<answer>?</answer>"])

    def oracle_response(self) -> str | None:
        """The reply an optimal (or reference) player writes to the current observation, if any."""
        return None

    def oracle_rationale(self) -> str | None:
        """A short, true explanation of :meth:`oracle_response`, made from the env's state (never by a
        model), for demonstrations that reason before they answer; ``None``: the env gives none."""
        return None

    def think(self, text: str) -> str:
        """``text`` in the env's thinking format, to stand before a reply (``<think>...</think>``)."""
        return f"<think>{text}</think>\n"

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of the env's tools (none by default)."""
        return []

    def close(self) -> None:
        """Release resources; calling it twice is fine."""

    async def areset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """:meth:`reset` off the event loop."""
        if options is None:
            return await asyncio.to_thread(self.reset, seed)
        return await asyncio.to_thread(self.reset, seed, options)

    async def astep(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """:meth:`step` off the event loop."""
        return await asyncio.to_thread(self.step, response_text)


def _checked_reset_args(env: Env, takes_options: bool, seed: Any, options: Any) -> tuple[tuple, dict]:
    """The arguments to hand a subclass's reset: the seed checked, options a dict or left out."""
    seed = check_seed(seed)
    if options is None:
        return (seed,), ({"options": None} if takes_options else {})
    if not isinstance(options, Mapping):
        raise TypeError(f"reset options must be a mapping, got {type(options).__name__}")
    if not takes_options:
        raise TypeError(f"{type(env).__name__}.reset takes no options, got {sorted(map(str, options))}")
    return (seed,), {"options": dict(options)}


def _guard_reset(reset: Callable[..., Any]) -> Callable[..., Any]:
    takes_options = "options" in inspect.signature(reset).parameters
    if inspect.iscoroutinefunction(reset):

        @functools.wraps(reset)
        async def aguarded(self: Env, seed: Any = None, options: Any = None) -> Any:
            args, kwargs = _checked_reset_args(self, takes_options, seed, options)
            with recorder_of(self).resetting(self, args[0], kwargs.get("options")):
                return await reset(self, *args, **kwargs)

        aguarded._guarded = True  # type: ignore[attr-defined]
        return aguarded

    @functools.wraps(reset)
    def guarded(self: Env, seed: Any = None, options: Any = None) -> Any:
        args, kwargs = _checked_reset_args(self, takes_options, seed, options)
        with recorder_of(self).resetting(self, args[0], kwargs.get("options")):
            return reset(self, *args, **kwargs)

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


def _guard_step(step: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(step):

        @functools.wraps(step)
        async def aguarded(self: Env, response_text: Any) -> Any:
            reply = check_response_text(response_text)
            with recorder_of(self).stepping(reply):
                return await step(self, reply)

        aguarded._guarded = True  # type: ignore[attr-defined]
        return aguarded

    @functools.wraps(step)
    def guarded(self: Env, response_text: Any) -> Any:
        reply = check_response_text(response_text)
        with recorder_of(self).stepping(reply):
            return step(self, reply)

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


#: The methods whose arguments the protocol checks for every subclass that defines them.
_GUARDS = {"reset": _guard_reset, "areset": _guard_reset, "step": _guard_step, "astep": _guard_step}


def resolve_env_config(sample: Any = None, config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per-sample config from ``sample.metadata["env_config"]``, overridden by explicit ``config``.

    ``sample`` is anything with a ``metadata`` mapping (slime's ``Sample``) or a plain dict row.
    """
    metadata = sample.get("metadata") if isinstance(sample, Mapping) else getattr(sample, "metadata", None)
    env_config = (metadata or {}).get("env_config") or {}
    if not isinstance(env_config, Mapping):
        raise TypeError(f"sample.metadata['env_config'] must be a mapping, got {type(env_config).__name__}")
    return {**env_config, **(config or {})}


#: The turn cap of an episode when neither its row, its env config nor the trainer's config gives
#: one: the slime and verl hooks, ``vlm-envs eval`` and the datasets all use it.
DEFAULT_MAX_TURNS = 8


def args_max_turns(args: Any, default: int | None = None) -> int | None:
    """``args.max_turns`` from slime's args (set by its ``--custom-config-path`` YAML), if given."""
    value = getattr(args, "max_turns", None)
    return int(value) if value is not None else default


def trainer_env_config(sample: Any, args: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """What a ``build_env(sample, args, **config)`` builds from: :func:`resolve_env_config`, with the
    trainer's ``args.max_turns`` over the sample's unless ``config`` itself sets ``max_turns``."""
    merged = resolve_env_config(sample, config)
    max_turns = args_max_turns(args)
    if max_turns is not None and "max_turns" not in config:
        merged["max_turns"] = max_turns
    return merged
