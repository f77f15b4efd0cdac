"""Image encodings shared by the engine clients (no torch, no HTTP)."""

from __future__ import annotations

import base64
import io

from PIL import Image


def png_bytes(image: Image.Image) -> bytes:
    """An image as PNG bytes (RGB), as parquet image columns hold it."""
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    return buf.getvalue()


#: The image modes PNG stores as they are.
PNG_MODES = frozenset({"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"})


def lossless_png(image: Image.Image) -> bytes:
    """``image`` as PNG bytes in its own mode (lossless); modes PNG lacks go as RGB/RGBA."""
    if image.mode not in PNG_MODES:
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    buf = io.BytesIO()
    # PNG is lossless at every level: level 1 only trades a little size for a lot of speed.
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def png_data_uri(image: Image.Image) -> str:
    """``image`` as a PNG data URI, the form chat and generate APIs take images in."""
    return "data:image/png;base64," + base64.b64encode(lossless_png(image)).decode("ascii")
