"""Image encodings shared by every path that ships an image (no torch, no HTTP).

One lossless encoder: :func:`vlm_envs.imaging.png.encode_png`, a numpy PNG writer deflating with isa-l
where the ``isal`` package is installed, else with zlib.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from PIL import Image

from vlm_envs.imaging.png import BACKEND, PNG_MODES, encode_png

__all__ = ["BACKEND", "PNG_MODES", "encode_png", "image_column", "lossless_png", "png_bytes", "png_data_uri"]


def png_bytes(image: Image.Image) -> bytes:
    """An image as PNG bytes (RGB), as parquet image columns hold it."""
    return encode_png(image if image.mode == "RGB" else image.convert("RGB"))


def image_column(images: Iterable[Image.Image]) -> list[dict[str, Any]]:
    """Images as a parquet image column holds them (``datasets``' Image feature): RGB PNGs, no path."""
    return [{"bytes": png_bytes(image), "path": None} for image in images]


def lossless_png(image: Image.Image) -> bytes:
    """``image`` as PNG bytes in its own mode (lossless); modes PNG lacks go as RGB/RGBA.

    Raises ``ValueError`` for an empty image and for an "I" image with values outside 0..65535.
    """
    if image.mode not in PNG_MODES:
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    return encode_png(image)


def png_data_uri(image: Image.Image) -> str:
    """``image`` as a PNG data URI, the form chat and generate APIs take images in."""
    return "data:image/png;base64," + base64.b64encode(lossless_png(image)).decode("ascii")
