"""Turning a slime ``Sample`` or a geo3k dataset row into a :class:`Geo3kProblem`."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.geo3k.problems.base import Geo3kProblem
from vlm_envs.protocol import IMAGE_PLACEHOLDER

#: Qwen-VL chat templates render an image as this span; a rendered prompt gets ``<image>`` back for it.
QWEN_IMAGE_SPAN = "<|vision_start|><|image_pad|><|vision_end|>"
_LAST_USER_TURN = re.compile(r"<\|im_start\|>user\n(.*?)(?:<\|im_end\|>|$)", re.DOTALL)


def _field(obj: Any, *names: str) -> Any:
    """The first of ``names`` present and not None on a mapping or an object."""
    for name in names:
        value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
        if value is not None:
            return value
    return None


def _content_text(content: Any) -> str:
    """Chat-message content (a string or a list of parts) as text with ``<image>`` for image parts."""
    if isinstance(content, str):
        return content
    pieces = []
    for part in content or []:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("image", "image_url"):
            pieces.append(IMAGE_PLACEHOLDER)
        elif kind == "text":
            pieces.append(str(part.get("text", "")))
    return "".join(pieces)


def prompt_text(prompt: Any) -> str:
    """The problem text of a prompt: a plain string, a list of chat messages, or a rendered Qwen prompt."""
    if isinstance(prompt, list):
        users = [m for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        return _content_text(users[-1].get("content")) if users else ""
    text = str(prompt)
    turns = _LAST_USER_TURN.findall(text)
    if turns:
        text = turns[-1]
    return text.replace(QWEN_IMAGE_SPAN, IMAGE_PLACEHOLDER).strip()


def to_image(value: Any) -> Image.Image:
    """A PIL image from a PIL image, encoded bytes, or a ``datasets`` image dict (``bytes``/``path``)."""
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, Mapping):
        if value.get("bytes") is not None:
            value = value["bytes"]
        elif value.get("path"):
            with Image.open(value["path"]) as im:
                return im.convert("RGB")
    if isinstance(value, bytes | bytearray):
        with Image.open(io.BytesIO(value)) as im:
            return im.convert("RGB")
    raise TypeError(f"cannot read an image from {type(value).__name__}")


def sample_images(sample: Any) -> list[Image.Image]:
    """The images of a slime Sample (``multimodal_inputs["images"]``) or of a row (``images``/``image``)."""
    multimodal = _field(sample, "multimodal_inputs")
    raw = multimodal.get("images") if isinstance(multimodal, Mapping) else None
    if raw is None:
        raw = _field(sample, "images", "image")
    if raw is None:
        return []
    if not isinstance(raw, list | tuple):
        raw = [raw]
    return [to_image(im) for im in raw]


def problem_from_sample(sample: Any, source: str = "sample") -> Geo3kProblem:
    """The problem a slime Sample or a dataset row holds (``prompt``/``problem``, ``label``/``answer``).

    ``ValueError`` if it carries no problem text or no answer.
    """
    prompt = _field(sample, "problem", "prompt")
    answer = _field(sample, "label", "answer")
    if prompt is None or answer is None:
        raise ValueError(
            "a geo3k sample needs a problem (sample.prompt or row['problem']) and an answer "
            "(sample.label or row['answer'])"
        )
    ident = _field(sample, "id", "index")
    return Geo3kProblem(
        text=prompt_text(prompt),
        answer=str(answer).strip(),
        images=tuple(sample_images(sample)),
        kind="dataset",
        source=source,
        id="" if ident is None else str(ident),
    )
