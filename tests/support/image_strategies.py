"""Hypothesis strategies for images in every mode PNG stores."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st
from PIL import Image

from vlm_envs.imaging import PNG_MODES

#: Bytes per pixel of Pillow's raw layout, for the modes built from random bytes.
RAW_BYTES = {"L": 1, "LA": 2, "I;16": 2, "RGB": 3, "RGBA": 4}


@st.composite
def images(draw: st.DrawFn) -> Image.Image:
    """Any image of a PNG mode: random sizes (1x1 and odd widths among them), pixels and palettes."""
    mode = draw(st.sampled_from(sorted(PNG_MODES)))
    width, height = draw(st.integers(1, 37)), draw(st.integers(1, 9))
    if mode == "1":
        size = (width + 7) // 8 * height
        return Image.frombytes("1", (width, height), draw(st.binary(min_size=size, max_size=size)))
    if mode == "I":
        values = draw(st.lists(st.integers(0, 0xFFFF), min_size=width * height, max_size=width * height))
        return Image.fromarray(np.array(values, np.int32).reshape(height, width))
    if mode != "P":
        size = RAW_BYTES[mode] * width * height
        return Image.frombytes(mode, (width, height), draw(st.binary(min_size=size, max_size=size)))
    used = draw(st.integers(1, 256))
    indices = draw(st.binary(min_size=width * height, max_size=width * height))
    image = Image.frombytes("P", (width, height), bytes(b % used for b in indices))
    palette_mode = draw(st.sampled_from(["RGB", "RGBA", None]))
    entries = draw(st.integers(1, 256)) if palette_mode is not None else 0
    if palette_mode is not None:
        size = entries * len(palette_mode)
        image.putpalette(draw(st.binary(min_size=size, max_size=size)), palette_mode)
    # transparency within the palette: Pillow's convert refuses an index or alphas beyond it
    index = st.integers(0, entries - 1) if entries else st.nothing()
    transparency: Any = draw(st.one_of(st.none(), index, st.binary(max_size=entries)))
    if transparency is not None:
        image.info["transparency"] = transparency
    return image
