"""The PNG reader (vlm_envs.imaging.decode): Pillow's pixels, faster, and one line for a bad file."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from image_strategies import images
from PIL import Image

from vlm_envs.imaging import encode_png
from vlm_envs.imaging.decode import decode_png, png_header


def pillow(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


SIGNATURE = b"\x89PNG\r\n\x1a\n"
ZEROS_2X2 = zlib.compress(b"\0" * 6)  # a 2x2 8-bit grey PNG's rows: a filter byte and 2 pixels each


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_file(width: int, height: int, depth: int, colour: int, idat: bytes, *extra: bytes) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + b"".join(extra)
        + chunk(b"IDAT", idat)
        + chunk(b"IEND", b"")
    )


def same_image(ours: Image.Image, theirs: Image.Image) -> None:
    assert (ours.mode, ours.size) == (theirs.mode, theirs.size)
    assert ours.tobytes() == theirs.tobytes()
    assert ours.getpalette() == theirs.getpalette()
    assert ours.convert("RGBA").tobytes() == theirs.convert("RGBA").tobytes()


@settings(max_examples=300, deadline=None)
@given(images())
def test_our_pngs_decode_as_pillow_decodes_them_in_every_mode(image: Image.Image):
    data = encode_png(image)
    same_image(decode_png(data), pillow(data))


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA"])
def test_pillows_pngs_with_every_filter_decode_as_pillow_decodes_them(mode: str):
    rng = np.random.default_rng(1)
    smooth = np.cumsum(rng.integers(0, 3, (23, 31, 4)), axis=1).astype(np.uint8)  # filters pick Sub/Paeth
    image = Image.fromarray(smooth, "RGBA").convert(mode)
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=9)
    data = out.getvalue()
    at = data.index(b"IDAT")
    (length,) = struct.unpack(">I", data[at - 4 : at])
    filters = set(zlib.decompress(data[at + 4 : at + 4 + length])[:: 1 + len(image.tobytes()) // 23])
    assert filters - {0, 2}, "Pillow wrote only the filters read on the fast path"
    same_image(decode_png(data), pillow(data))


def test_up_rows_from_a_raw_first_row_unfilter():
    rows = np.array([[1, 2, 3], [5, 5, 5], [250, 0, 9]], np.uint8)
    filtered = np.concatenate([[[0]], [[2]], [[2]]], axis=0).astype(np.uint8)
    deltas = np.vstack([rows[0], rows[1] - rows[0], rows[2] - rows[1]]).astype(np.uint8)
    data = png_file(3, 3, 8, 0, zlib.compress(np.hstack([filtered, deltas]).tobytes()))
    assert np.array_equal(np.asarray(decode_png(data)), rows)


BAD_PNGS = {
    "not a PNG": (b"GIF89a" + b"\0" * 40, "not a PNG"),
    "a header CRC off": (
        png_file(2, 2, 8, 0, ZEROS_2X2)[:29] + b"\0\0\0\0" + b"\0" * 30,
        "header's CRC does not match",
    ),
    "a data CRC off": (png_file(2, 2, 8, 0, ZEROS_2X2)[:-20] + b"\0" * 8, "CRC of the PNG's"),
    "cut short": (png_file(4, 4, 8, 2, zlib.compress(b"\0" * 52))[:45], "runs past its end"),
    "no end": (png_file(2, 2, 8, 0, ZEROS_2X2)[:-12], "ends before its IEND"),
    "no image data": (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 0, 0, 0, 0))
        + chunk(b"IEND", b""),
        "no image data",
    ),
    "not deflate": (png_file(2, 2, 8, 0, b"\xff" * 20), "does not inflate"),
    "too few bytes": (
        png_file(2, 2, 8, 0, zlib.compress(b"\0" * 5)),
        "holds 5 bytes where its header says 6",
    ),
    "a bomb": (
        png_file(2, 2, 8, 0, zlib.compress(b"\0" * (64 << 20))),
        "holds 7 bytes where its header says 6",
    ),
    "a depth PNG lacks": (png_file(2, 2, 3, 2, ZEROS_2X2), "unsupported PNG header"),
    "a palette PNG without its palette": (png_file(2, 2, 8, 3, ZEROS_2X2), "PLTE"),
    "an empty PNG": (png_file(0, 2, 8, 0, zlib.compress(b"\0" * 2)), "empty"),
    "a filter PNG lacks": (png_file(2, 2, 8, 0, zlib.compress(b"\x09\0\0" * 2)), "does not decode"),
}


@pytest.mark.parametrize("case", list(BAD_PNGS))
def test_a_bad_png_is_one_line_saying_what(case: str):
    data, expected = BAD_PNGS[case]
    with pytest.raises(ValueError) as caught:
        decode_png(data)
    assert expected in str(caught.value) and "\n" not in str(caught.value)


def test_the_size_comes_from_the_header_alone():
    assert png_header(png_file(3, 5, 8, 0, b"")) == (3, 5)
