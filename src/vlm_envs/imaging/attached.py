"""PNG bytes an env already holds for an image it hands over, found again by whoever encodes it.

An env that keeps its frame as PNG (Sokoban writes it from palette rows, at half the bytes) attaches
the bytes, or a function that makes them, to the image in its observation; :func:`lossless_png` and
:func:`png_data_uri` then return them instead of encoding the image again: the server's wire, the
engines' data URIs, eval's frame files. The bytes must decode to the image's pixels; they may be a
palette PNG of an RGB image (decoding to "P": ``convert(image.mode)`` gives the image back).

Attaching marks the image read-only: Pillow copies a read-only image's pixels before changing them
(paste, draw, putpixel, putdata), so a changed image no longer matches its bytes and is encoded afresh.
The attachment lives as long as the image.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from PIL import Image


class _Attachment:
    """The bytes (or their maker) and what the image was when they were attached."""

    __slots__ = ("core", "lock", "make", "palette", "png", "shape")

    def __init__(self, image: Image.Image, png: bytes | Callable[[], bytes]) -> None:
        self.core: Any = image.im
        self.shape = (image.mode, image.size)
        self.palette = image.getpalette() if image.mode == "P" else None
        self.png = png if isinstance(png, bytes) else None
        self.make = None if isinstance(png, bytes) else png
        self.lock = threading.Lock()

    def matches(self, image: Image.Image) -> bool:
        return (
            image.im is self.core
            and (image.mode, image.size) == self.shape
            and (self.palette is None or image.getpalette() == self.palette)
        )

    def bytes(self) -> bytes:
        if self.png is None:
            with self.lock:
                if self.png is None and self.make is not None:
                    self.png, self.make = self.make(), None
        assert self.png is not None
        return self.png


_attached: dict[int, _Attachment] = {}


def attach_png(image: Image.Image, png: bytes | Callable[[], bytes]) -> Image.Image:
    """Attach ``png`` (bytes, or a function making them on first need) to ``image``, and return it.

    The bytes must decode to ``image``'s pixels (:func:`vlm_envs.checker` checks every env's). An image
    that has bytes already keeps them.
    """
    key = id(image)
    if key not in _attached:
        image.load()
        image.readonly = 1
        _attached[key] = _Attachment(image, png)
        weakref.finalize(image, _attached.pop, key, None)
    return image


def attached_png(image: Image.Image) -> bytes | None:
    """The PNG bytes attached to ``image`` while its pixels are those they were attached with."""
    attachment = _attached.get(id(image))
    if attachment is None or not attachment.matches(image):
        return None
    return attachment.bytes()
