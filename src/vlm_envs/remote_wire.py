"""What a ``vlm-envs serve`` server's WebSocket replies may hold, read as hostile input by the client.

:class:`~vlm_envs.remote.RemoteEnv` reads every frame through :func:`read_frame` and :func:`parse_reply` /
:func:`parse_state` / :func:`parse_random` / :func:`parse_error`: a text frame holding one JSON object
``{"type", "data"}``, no ``NaN``/``Infinity``, nested at most :data:`MAX_REPLY_DEPTH` deep, every field
of the type the wire format (:mod:`vlm_envs.serve.wire`) gives it, nothing coerced (``done: "no"`` is
refused, never read as true), every number finite, where the episode stands bounded (a ``state_key``
of at most :data:`~vlm_envs.serve.wire.MAX_STATE_KEY_CHARS`, a ``state_text`` of at most
:data:`~vlm_envs.serve.wire.MAX_STATE_TEXT_CHARS` characters, a distance an ``int`` from -1). Images are
base64 PNGs whose sizes are read from their headers and checked against
:data:`~vlm_envs.envs.config.MAX_IMAGE_SIDE`, :data:`MAX_REPLY_IMAGES` and :data:`MAX_REPLY_PIXELS` before
any is decoded, so a small PNG that decodes to gigabytes is refused at its header. Anything else is a
:class:`MalformedReply` whose message is one line.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
import random
from typing import Any, Literal

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from vlm_envs.envs.config import MAX_IMAGE_SIDE
from vlm_envs.imaging import PNG_MODES, attach_png
from vlm_envs.imaging.decode import decode_png, png_header
from vlm_envs.protocol import Observation
from vlm_envs.serve.wire import (
    MT_VERSION,
    Distance,
    RandomState,
    SignalError,
    SignalName,
    StateKey,
    StateText,
)

#: The most images one reply may carry: an env shows one or two per observation.
MAX_REPLY_IMAGES = 16
#: The most pixels all the images of one reply may hold together: four images of the largest side.
MAX_REPLY_PIXELS = 4 * MAX_IMAGE_SIDE**2
#: How deep a reply may nest (its tools' JSON schemas nest about ten levels).
MAX_REPLY_DEPTH = 32
#: The most JSON values (bounded by its ``[``, ``{`` and ``,``) one reply may hold: a reply of a
#: million small numbers would cost the client more memory than its images.
MAX_REPLY_VALUES = 1_000_000
#: The longest text of a server's taken into an error message.
MAX_MESSAGE_CHARS = 300


class MalformedReply(ValueError):
    """A server's frame is not what the wire format allows; the message says why in one line."""


def one_line(text: Any) -> str:
    """A server's text as one printable line of at most :data:`MAX_MESSAGE_CHARS` characters."""
    words = str(text)[: 4 * MAX_MESSAGE_CHARS].split()
    return "".join(c for c in " ".join(words) if c.isprintable())[:MAX_MESSAGE_CHARS]


class _Strict(BaseModel):
    """Types as the wire gives them (no coercion), finite numbers; fields the client does not read
    are left alone (a newer server may send more)."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore", frozen=True)


class ErrorData(_Strict):
    """An ``error`` frame's ``data``."""

    message: str
    code: str | None = None
    status: int | None = None


class ObservationFields(_Strict):
    """A reply's ``observation`` (images still base64 strings; its ``metadata`` mirrors the reply's)."""

    text: str
    images: list[str] = Field(max_length=MAX_REPLY_IMAGES)
    #: Each image's own mode (a PNG may be a palette form of it); absent from servers before it.
    image_modes: list[str] | None = None
    image_slots: list[int]
    role: Literal["user", "tool"]
    metadata: dict[str, Any]


class ReplyMetadata(_Strict):
    """The ``metadata`` every reset and step reply carries."""

    session_id: str = Field(min_length=1, max_length=64)
    episode_id: str = Field(min_length=1, max_length=255)
    status: Literal["running", "terminated", "truncated"]
    terminated: bool
    truncated: bool
    metrics: dict[str, bool | int | float]
    info: dict[str, Any]
    episode_reward: float | None
    #: Why the server refused the env's reward (the episode's, or this step's when ``reward`` is null).
    reward_error: str | None = None
    #: The env's own observation metadata (the observation's ``metadata`` mirrors this whole mapping).
    observation_metadata: dict[str, Any] = Field(default_factory=dict)
    #: Where the episode stands after the call (:class:`~vlm_envs.serve.wire.Signals`), bounded as the
    #: server bounds them; absent from servers before them (``None``, as an env that does not say).
    state_key: StateKey | None = None
    state_text: StateText | None = None
    distance_to_goal: Distance | None = None
    #: Why the served env's method gave none of a signal (it raised, or gave what the wire does not carry).
    signal_errors: dict[SignalName, SignalError] = Field(default_factory=dict)


class ResetMetadata(ReplyMetadata):
    """A reset reply's ``metadata``: the common fields and the env's own."""

    system_prompt: str | None
    tools: list[dict[str, Any]]
    has_episode_reward: bool
    reset_info: dict[str, Any]


class RestoreMetadata(ResetMetadata):
    """A reset-from-snapshot reply's ``metadata``: a reset's, and the steps the restored episode played."""

    restored: Literal[True]
    step: int = Field(ge=0)


class StepMetadata(ReplyMetadata):
    """A step reply's ``metadata``: the common fields and the step's number in its episode."""

    step: int = Field(ge=1)


class _Reply(_Strict):
    observation: ObservationFields
    reward: float | None
    done: bool


class _ResetReply(_Reply):
    metadata: ResetMetadata


class _StepReply(_Reply):
    metadata: StepMetadata


class _RestoreReply(_Reply):
    metadata: RestoreMetadata


_REPLIES: dict[str, type[_Reply]] = {"reset": _ResetReply, "step": _StepReply, "restore": _RestoreReply}


class RandomData(_Strict):
    """A ``random`` frame's ``data``: the env's random reply and the generator state after drawing it
    (its words checked as :class:`~vlm_envs.serve.wire.RandomState` checks them)."""

    text: str
    state: dict[str, Any]


class StateData(_Strict):
    """A ``state`` frame's ``data``."""

    episode_id: str | None
    step_count: int = Field(ge=0)
    done: bool
    oracle_response: str | None = None


@dataclasses.dataclass(frozen=True)
class Reply:
    """A reset or step reply, checked: the observation (images decoded), ``done``, the step's reward
    (``None`` for a reset, or a step reward the server refused) and the metadata."""

    obs: Observation
    done: bool
    reward: float | None
    metadata: ResetMetadata | StepMetadata | RestoreMetadata


def read_frame(raw: str | bytes) -> tuple[str, dict[str, Any]]:
    """A frame's ``(type, data)``; :class:`MalformedReply` for a binary frame, text that is not one
    JSON object ``{"type": str, "data": object}``, ``NaN`` or ``Infinity``, or a reply too deep or large."""
    if not isinstance(raw, str):
        raise MalformedReply("a binary frame (the protocol sends JSON text frames)")
    if raw.count("[") + raw.count("{") + raw.count(",") > MAX_REPLY_VALUES:
        raise MalformedReply(f"more than {MAX_REPLY_VALUES:,} JSON values")
    try:
        frame = json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise MalformedReply(f"JSON nested deeper than {MAX_REPLY_DEPTH} levels") from None
    except ValueError as err:  # JSONDecodeError, and the constants refused
        raise MalformedReply(f"not JSON: {one_line(err)}") from None
    if not isinstance(frame, dict):
        raise MalformedReply(f"a JSON {type(frame).__name__}, not an object")
    _check_depth(frame)
    kind, data = frame.get("type"), frame.get("data")
    if not isinstance(kind, str):
        raise MalformedReply(f"'type' must be a string, got {_kind(kind)}")
    if not isinstance(data, dict):
        raise MalformedReply(f"'data' must be an object, got {_kind(data)}")
    return kind, data


def parse_reply(data: dict[str, Any], op: Literal["reset", "step", "restore"]) -> Reply:
    """An ``observation`` frame's ``data`` as the reply to ``op`` (``restore``: a reset with a snapshot);
    :class:`MalformedReply` otherwise."""
    reply = _validate(_REPLIES[op], data)
    fields = reply.observation
    try:
        obs = Observation(
            text=fields.text,
            images=decode_images(fields.images, fields.image_modes),
            role=fields.role,
            metadata=reply.metadata.observation_metadata,
            image_slots=tuple(fields.image_slots),
        )
    except ValidationError as err:
        raise MalformedReply(f"observation: {_first_error(err)}") from None
    return Reply(obs, reply.done, reply.reward, reply.metadata)


def parse_state(data: dict[str, Any]) -> StateData:
    """A ``state`` frame's ``data``; :class:`MalformedReply` otherwise."""
    return _validate(StateData, data)


def parse_random(data: dict[str, Any]) -> tuple[str, tuple[int, tuple[int, ...], float | None]]:
    """A ``random`` frame's ``data`` as ``(text, state)``, ``state`` as ``random.Random.setstate``
    takes it (a valid one: any generator accepts it); :class:`MalformedReply` otherwise."""
    reply = _validate(RandomData, data)
    try:
        state = RandomState.model_validate(reply.state)
        state.load_into(random.Random())  # a position past the words is refused here, not by the caller
    except ValidationError as err:
        raise MalformedReply(f"state: {_first_error(err)}") from None
    except ValueError as err:
        raise MalformedReply(f"state: {one_line(err)}") from None
    return reply.text, (MT_VERSION, tuple(state.words), state.gauss_next)


def parse_error(data: dict[str, Any]) -> ErrorData:
    """An ``error`` frame's ``data``; :class:`MalformedReply` otherwise."""
    return _validate(ErrorData, data)


#: The modes a decoded PNG converts to without loss: a palette's colours, 16-bit into 32-bit.
_LOSSLESS_FROM = {"P": ("RGB", "RGBA", "L", "LA"), "I;16": ("I",)}


def decode_images(images: list[str], modes: list[str] | None = None) -> list[Image.Image]:
    """Wire images (base64 PNGs) as loaded PIL images, each side at most ``MAX_IMAGE_SIDE`` and all
    together at most :data:`MAX_REPLY_PIXELS`, both checked from the headers before any is decoded.

    ``modes`` (the reply's ``image_modes``) gives each image its own mode back (a palette PNG of an RGB
    frame decodes to "P"). Each image keeps the bytes it came in (:func:`attach_png`): sent on, to an
    engine or another server, it is not encoded again.
    """
    files, total = [], 0
    for index, text in enumerate(images):
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedReply(f"image {index} is not base64") from None
        try:
            width, height = png_header(data)
        except ValueError as err:
            raise MalformedReply(f"image {index}: {err}") from None
        if not (0 < width <= MAX_IMAGE_SIDE and 0 < height <= MAX_IMAGE_SIDE):
            raise MalformedReply(
                f"image {index} is {width}x{height} px; each side may be 1 to {MAX_IMAGE_SIDE} px"
            )
        total += width * height
        if total > MAX_REPLY_PIXELS:
            raise MalformedReply(f"the images of one reply hold more than {MAX_REPLY_PIXELS:,} pixels")
        files.append(data)
    if modes is not None and (len(modes) != len(images) or not set(modes) <= PNG_MODES):
        raise MalformedReply(f"'image_modes' must name one of {sorted(PNG_MODES)} for each image")
    decoded = []
    for index, data in enumerate(files):
        try:
            image = decode_png(data)
        except ValueError as err:
            raise MalformedReply(f"image {index} does not decode: {err}") from None
        if modes is not None and image.mode != modes[index]:
            if modes[index] not in _LOSSLESS_FROM.get(image.mode, ()):
                raise MalformedReply(
                    f"image {index} is a {image.mode} PNG, not the {modes[index]} it is said to be"
                )
            image = image.convert(modes[index])
        decoded.append(attach_png(image, data))
    return decoded


def no_extra_frame(ws: Any) -> None:
    """:class:`MalformedReply` if a second frame already waits behind the reply just read from ``ws``
    (a ``websockets`` connection)."""
    from websockets.exceptions import ConnectionClosed

    try:
        ws.recv(timeout=0)
    except (TimeoutError, ConnectionClosed):  # nothing more (or the server closed after answering)
        return
    raise MalformedReply("a second frame for one request")


def _validate(model: type[_Strict], data: dict[str, Any]) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise MalformedReply(_first_error(err)) from None


def _first_error(err: ValidationError) -> str:
    first = err.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return one_line(f"{where}: {message}" if where else message)


def _check_depth(frame: dict[str, Any]) -> None:
    """Refuse a frame nested deeper than :data:`MAX_REPLY_DEPTH` (only containers are walked)."""
    stack: list[tuple[dict | list, int]] = [(frame, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value
        if children and depth > MAX_REPLY_DEPTH:
            raise MalformedReply(f"JSON nested deeper than {MAX_REPLY_DEPTH} levels")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is beyond any float (numbers must be finite)")
    return value


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
