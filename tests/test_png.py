"""The PNG writer (vlm_envs.imaging.png): what Pillow decodes is the image, in every mode PNG stores."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from image_strategies import images
from PIL import Image

import vlm_envs
from vlm_envs.imaging import BACKEND, encode_png, lossless_png, png_bytes, png_data_uri


def decode(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@settings(max_examples=300, deadline=None)
@given(images())
def test_pillow_decodes_exactly_the_image_in_every_mode(image: Image.Image):
    decoded = decode(encode_png(image))
    assert decoded.size == image.size
    if image.mode == "I":  # PNG's 16-bit greyscale, which Pillow opens as "I;16"
        assert decoded.mode == "I;16"
        assert np.array_equal(np.asarray(decoded), np.asarray(image))
        return
    assert decoded.mode == image.mode
    assert decoded.tobytes() == image.tobytes()
    if image.mode == "P":  # the same palette entries, and every pixel the same colour and alpha
        palette = image.getpalette("RGB") or []
        assert (decoded.getpalette("RGB") or [])[: len(palette)] == palette
        assert decoded.convert("RGBA").tobytes() == image.convert("RGBA").tobytes()


def test_grey_and_rgb_keep_a_transparent_colour_png_can_mark():
    grey = Image.new("L", (3, 2), 7)
    grey.info["transparency"] = 7
    rgb = Image.new("RGB", (3, 2), (1, 2, 3))
    rgb.info["transparency"] = (1, 2, 3)
    deep = Image.new("I;16", (3, 2), 4000)
    deep.info["transparency"] = 4000
    for image in (grey, rgb, deep):
        assert decode(encode_png(image)).info["transparency"] == image.info["transparency"]
    grey.info["transparency"] = 300  # beyond 8 bits: no colour to mark, the pixels still exact
    assert "transparency" not in decode(encode_png(grey)).info
    indexed = Image.frombytes("P", (3, 1), bytes([0, 1, 2]))
    indexed.putpalette(bytes(range(9)))
    for beyond in (200, b"\x01" * 40, "not a transparency"):  # past the palette, or no kind PNG knows
        indexed.info["transparency"] = beyond
        decoded = decode(encode_png(indexed))
        assert decoded.tobytes() == indexed.tobytes() and decoded.getpalette() == indexed.getpalette()


def test_empty_images_and_ints_beyond_16_bits_are_refused():
    for size in [(0, 5), (5, 0), (0, 0)]:
        with pytest.raises(ValueError, match="empty image"):
            encode_png(Image.new("RGB", size))
    for value in (-1, 65536):
        with pytest.raises(ValueError, match=r"0\.\.65535"):
            lossless_png(Image.new("I", (2, 2), value))
    with pytest.raises(ValueError, match="convert it first"):
        encode_png(Image.new("CMYK", (2, 2)))


def test_modes_png_lacks_go_as_rgb_or_rgba_and_png_bytes_is_rgb():
    assert decode(lossless_png(Image.new("CMYK", (3, 2), (1, 2, 3, 4)))).mode == "RGB"
    assert decode(lossless_png(Image.new("PA", (3, 2)))).mode == "RGBA"
    grey = Image.new("L", (4, 3), 9)
    assert decode(png_bytes(grey)).tobytes() == grey.convert("RGB").tobytes()
    assert png_data_uri(grey).startswith("data:image/png;base64,")


def test_isal_deflates_where_installed():
    pytest.importorskip("isal")
    assert BACKEND == "isal"


def test_without_isal_zlib_deflates_the_same_pixels():
    script = textwrap.dedent(
        """
        import io, sys
        sys.modules["isal"] = None
        import numpy as np
        from PIL import Image
        from vlm_envs.imaging.png import BACKEND, PNG_MODES, encode_png
        assert BACKEND == "zlib", BACKEND
        rng = np.random.default_rng(0)
        for mode in sorted(PNG_MODES - {"I"}):
            size = len(Image.new(mode, (13, 5)).tobytes())
            image = Image.frombytes(mode, (13, 5), rng.integers(0, 256, size, np.uint8).tobytes())
            assert Image.open(io.BytesIO(encode_png(image))).tobytes() == image.tobytes(), mode
        """
    )
    src = str(Path(vlm_envs.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
