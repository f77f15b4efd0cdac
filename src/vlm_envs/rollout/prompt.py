"""Where an episode's first prompt comes from when its env gives none.

slime-shaped envs keep "the question in the prompt": their first observation is empty, and the
prompt is the dataset's. A :class:`FallbackPrompt` carries that prompt into the episode loop (the
trainer hook resolves it from its sample; the loop knows only this class), and encodes it the way
the trainer encodes a dataset prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.rollout.codec import ChatCodec, CodecError, Encoded
from vlm_envs.rollout.trajectory import RENDERED_PROMPT


@dataclasses.dataclass(frozen=True)
class FallbackPrompt:
    """The prompt of an episode whose env's first observation is empty (no text, no images).

    ``text`` is a prompt already rendered with the chat template, encoded as it stands; or
    ``messages`` are chat messages, rendered here with the generation prompt. ``images`` are the
    prompt's images in placeholder order (for ``messages``, default: the image parts' own images).
    """

    text: str | None = None
    messages: tuple[Mapping[str, Any], ...] | None = None
    images: tuple[Image.Image, ...] = ()

    def __post_init__(self) -> None:
        if (self.text is None) == (self.messages is None):
            raise ValueError("give a FallbackPrompt either text or messages")

    def encode(self, codec: ChatCodec) -> tuple[Encoded, list[dict[str, Any]]]:
        """The encoded prompt and the conversation messages it stands for."""
        if self.text is not None:
            message = {"role": "user", "content": self.text, RENDERED_PROMPT: True}
            return codec.encode_rendered(self.text, self.images), [message]
        messages = [dict(m) for m in self.messages or ()]
        images = self.images or tuple(_part_images(messages))
        text = codec.render(messages, add_generation_prompt=True)
        return codec.encode_rendered(text, images), messages


def _part_images(messages: list[dict[str, Any]]) -> list[Image.Image]:
    found = [
        part.get("image")
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if isinstance(part, Mapping) and part.get("type") == "image"
    ]
    if not all(isinstance(im, Image.Image) for im in found):
        raise CodecError("a prompt image part holds no PIL image, and the sample gave no images")
    return found
