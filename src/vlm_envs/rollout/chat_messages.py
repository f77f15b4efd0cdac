"""Chat messages as the codec gives them to a chat template: the env's text made inert, image parts
found and counted.

A message's content is a string or a list of parts ``{"type": "text", "text": ...}`` /
``{"type": "image", "image": PIL.Image}`` (``Env.format_observation``'s form; a part without a
``type`` is known by its key).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from PIL import Image

from vlm_envs.rollout.images import CodecError, ProcessedImage

#: The codec's own markers begin with this, which message text never holds whole (see :func:`inert`).
MARKER = "\u2063VLMENVS-"
#: Breaks a special-token string (inserted after its first character).
_ZWNJ = "\u200c"


def structural_pattern(tokenizer: Any) -> re.Pattern[str]:
    """Special-token strings of ``tokenizer`` and the codec's markers, longest first."""
    special = {t.content for t in tokenizer.added_tokens_decoder.values() if t.special and len(t.content) > 1}
    literals = sorted(special | {MARKER}, key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in literals))


def inert(structural: re.Pattern[str], text: str) -> str:
    """``text`` with every match of ``structural`` broken by a zero-width non-joiner."""
    return structural.sub(_break, text) if text else text


def _break(match: re.Match[str]) -> str:
    return match[0][0] + _ZWNJ + match[0][1:]


def template_message(
    message: Mapping[str, Any], as_text: Callable[[str], str], vision: bool
) -> dict[str, Any]:
    """``message`` as a template takes it: image parts without their image, text through ``as_text``
    (except the assistant's: the model's own ids or the codec's markers), one string where the
    template is text-only (not ``vision``)."""
    content = message.get("content")
    if message["role"] == "assistant":
        as_text = _unchanged
    if content is None or isinstance(content, str):
        return {"role": message["role"], "content": as_text(content or "")}
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type")
        if is_image_part(part):
            if not vision:
                raise CodecError("an image part reached a text-only codec (a plain tokenizer)")
            parts.append({"type": "image"})
        elif kind == "text" or (kind is None and "text" in part):
            parts.append({"type": "text", "text": as_text(str(part.get("text", "")))})
        else:
            raise CodecError(f"unsupported content part type {kind!r} (only text and image)")
    if not vision:  # text-only templates expect a string
        return {"role": message["role"], "content": "".join(p["text"] for p in parts)}
    return {"role": message["role"], "content": parts}


def _unchanged(text: str) -> str:
    return text


def is_image_part(part: Mapping[str, Any]) -> bool:
    return part.get("type") == "image" or (part.get("type") is None and "image" in part)


def collect_images(
    messages: Sequence[Mapping[str, Any]], images: Sequence[Image.Image] | None
) -> list[Image.Image]:
    """The images of the image parts of ``messages`` in order: ``images`` (as many as the parts), or
    else the parts' own ``"image"`` values."""
    parts = [
        p
        for m in messages
        if not isinstance(m.get("content"), str | None)
        for p in m["content"]
        if is_image_part(p)
    ]
    if images is not None:
        if len(images) != len(parts):
            raise CodecError(f"{len(parts)} image parts but {len(images)} images given")
        return list(images)
    found = [p.get("image") for p in parts]
    if not all(isinstance(im, Image.Image) for im in found):
        raise CodecError("an image part holds no PIL image: put it under 'image' or pass images=")
    return found  # type: ignore[return-value]


def message_key(message: Mapping[str, Any], images: list[ProcessedImage]) -> tuple:
    """A hashable key of a message's role and content, images by their content key."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return (message["role"], content or "")
    keys = iter(p.key for p in images)
    parts = tuple(
        ("image", next(keys, None)) if is_image_part(p) else ("text", str(p.get("text", ""))) for p in content
    )
    return (message["role"], parts)
