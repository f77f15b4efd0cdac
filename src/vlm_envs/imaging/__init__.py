"""Image encodings shared by every path that ships an image (no torch, no HTTP).

One lossless encoder: :func:`vlm_envs.imaging.png.encode_png`, a numpy PNG writer deflating with isa-l
where the ``isal`` package is installed, else with zlib. An image whose env attached its PNG
(:func:`vlm_envs.imaging.attached.attach_png`) is not encoded again.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from PIL import Image

from vlm_envs.imaging.attached import attach_png, attached_png
from vlm_envs.imaging.png import BACKEND, PNG_MODES, encode_png, is_truecolour

__all__ = [
    "BACKEND",
    "PNG_MODES",
    "attach_png",
    "attached_png",
    "encode_png",
    "image_column",
    "lossless_png",
    "png_bytes",
    "png_data_uri",
    "stored_mode",
]


def png_bytes(image: Image.Image) -> bytes:
    """An image as PNG bytes (RGB), as parquet image columns hold it."""
    if image.mode != "RGB":
        return encode_png(image.convert("RGB"))
    png = attached_png(image)
    return png if png is not None and is_truecolour(png) else encode_png(image)


def image_column(images: Iterable[Image.Image]) -> list[dict[str, Any]]:
    """Images as a parquet image column holds them (``datasets``' Image feature): RGB PNGs, no path."""
    return [{"bytes": png_bytes(image), "path": None} for image in images]


def lossless_png(image: Image.Image) -> bytes:
    """``image`` as PNG bytes in its own mode (lossless); modes PNG lacks go as RGB/RGBA. Bytes its env
    attached come back as they are: a palette PNG of an RGB frame decodes to "P", the same pixels.

    Raises ``ValueError`` for an empty image and for an "I" image with values outside 0..65535.
    """
    if (attached := attached_png(image)) is not None:
        return attached
    mode = stored_mode(image)
    return encode_png(image if image.mode == mode else image.convert(mode))


def stored_mode(image: Image.Image) -> str:
    """The mode :func:`lossless_png` keeps ``image`` in: its own, or RGB/RGBA for modes PNG lacks."""
    if image.mode in PNG_MODES:
        return image.mode
    return "RGBA" if "A" in image.getbands() else "RGB"


def png_data_uri(image: Image.Image) -> str:
    """``image`` as a PNG data URI, the form chat and generate APIs take images in."""
    return "data:image/png;base64," + base64.b64encode(lossless_png(image)).decode("ascii")
