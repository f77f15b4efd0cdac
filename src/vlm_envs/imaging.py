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


def png_data_uri(image: Image.Image) -> str:
    """``image`` as a PNG data URI, the form chat and generate APIs take images in."""
    buf = io.BytesIO()
    # PNG is lossless at every level: level 1 only trades a little size for a lot of speed.
    image.save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
