"""Images as an engine's request carries them: data URIs, made once per image content.

An episode sends its images again on every turn (the whole context goes to the engine each time),
so a PIL image's PNG data URI is cached by content, in a thread-safe LRU bounded by characters.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict

from PIL import Image

from vlm_envs.imaging import png_data_uri
from vlm_envs.rollout.images import image_digest

#: An image as an engine takes it: a PIL image, encoded bytes, or a string (data URI, URL, path).
ImageInput = str | bytes | Image.Image


class _UriCache:
    """A thread-safe LRU of PNG data URIs keyed by image content, bounded by total characters."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get_or_make(self, image: Image.Image, key: str | None) -> str:
        key = key or image_digest(image)
        with self._lock:
            uri = self._items.get(key)
            if uri is not None:
                self._items.move_to_end(key)
                return uri
        uri = png_data_uri(image)
        with self._lock:
            if key not in self._items and len(uri) <= self.max_chars:
                self._items[key] = uri
                self._chars += len(uri)
                while self._chars > self.max_chars:
                    self._chars -= len(self._items.popitem(last=False)[1])
        return uri


_URI_CACHE = _UriCache(max_chars=256 << 20)
_MAGIC_MIME = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"RIFF", "image/webp"))


def image_data_uri(image: ImageInput, key: str | None = None) -> str:
    """An image as SGLang's ``image_data`` takes it.

    A PIL image becomes a PNG data URI, cached by content: ``key`` is its :func:`image_digest` if
    known (``ProcessedImage.key``), which saves hashing it again. Encoded bytes (PNG, JPEG, WebP)
    become a data URI of their own type; a string (data URI, URL, path) passes unchanged.
    """
    if isinstance(image, str):
        return image
    if isinstance(image, Image.Image):
        return _URI_CACHE.get_or_make(image, key)
    if isinstance(image, bytes | bytearray):
        mime = next((m for magic, m in _MAGIC_MIME if image.startswith(magic)), None)
        if mime is None:
            raise ValueError("image bytes are not PNG, JPEG or WebP")
        return f"data:{mime};base64," + base64.b64encode(image).decode("ascii")
    raise TypeError(f"an image must be a PIL image, encoded bytes or a string, not {type(image).__name__}")
