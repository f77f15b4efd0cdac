"""A PNG reader over numpy for the PNGs our writer makes: every byte checked, and faster than Pillow's.

Every chunk's CRC is checked, the image data is inflated by isa-l where installed (else zlib) into a
buffer bounded by what the header says the rows hold, and rows filtered with "None" or "Up" (all that
:mod:`vlm_envs.imaging.png` writes) are unfiltered with a few whole-array numpy additions. Anything
else (palettes, which Pillow reads as fast; other filters, interlacing, 16-bit colour, ancillary
chunks such as tRNS) goes to Pillow's decoder, after the same checks. Anything malformed raises
:class:`ValueError` in one line.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: (colour type, bit depth) -> (mode, Pillow raw mode, channels) for the layouts read here.
_LAYOUTS: dict[tuple[int, int], tuple[str, str, int]] = {
    (0, 1): ("1", "1", 1),
    (0, 8): ("L", "L", 1),
    (0, 16): ("I;16", "I;16B", 1),
    (2, 8): ("RGB", "RGB", 3),
    (4, 8): ("LA", "LA", 2),
    (6, 8): ("RGBA", "RGBA", 4),
}
#: Every (colour type, bit depth) PNG allows.
_VALID_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
_NONE, _UP = 0, 2


def _inflater() -> Callable[[], Any]:
    try:
        from isal import isal_zlib
    except ImportError:
        return zlib.decompressobj
    return isal_zlib.decompressobj


_decompressobj = _inflater()


def png_header(data: bytes) -> tuple[int, int]:
    """(width, height) from a PNG's signature and IHDR, checked; ``ValueError`` otherwise."""
    if len(data) < 33 or not data.startswith(_SIGNATURE) or data[12:16] != b"IHDR":
        raise ValueError("not a PNG (no PNG signature and header)")
    return struct.unpack(">II", data[16:24])


def decode_png(data: bytes) -> Image.Image:
    """``data`` (a PNG file) as a loaded image; ``ValueError`` naming what is wrong with a bad one."""
    width, height = png_header(data)
    depth, colour, compression, filtering, interlace = data[24:29]
    if depth not in _VALID_DEPTHS.get(colour, ()) or compression or filtering or interlace > 1:
        raise ValueError(f"unsupported PNG header (colour type {colour}, depth {depth})")
    if width == 0 or height == 0:
        raise ValueError("the PNG is empty (0 pixels wide or high)")
    chunks = _chunks(data)
    if colour == 3 and len(chunks.get(b"PLTE", ())) != 1:
        raise ValueError("a palette PNG needs one PLTE chunk")
    layout = _LAYOUTS.get((colour, depth))
    if interlace or layout is None or set(chunks) != {b"IDAT"}:
        return _pillow(data)  # it inflates the data itself, no further than the header's rows
    mode, raw_mode, channels = layout
    row_bytes = -(-width * depth * channels // 8)
    rows = _inflate(b"".join(chunks[b"IDAT"]), height * (row_bytes + 1))
    if (filtered := _unfilter(rows, height, row_bytes)) is None:
        return _pillow(data)
    return Image.frombytes(mode, (width, height), filtered.tobytes(), "raw", raw_mode)


def _chunks(data: bytes) -> dict[bytes, list[bytes]]:
    """The chunks after IHDR up to IEND, by type, every CRC checked."""
    chunks: dict[bytes, list[bytes]] = {}
    at = 33
    if zlib.crc32(data[12:29]) != struct.unpack(">I", data[29:33])[0]:
        raise ValueError("the PNG header's CRC does not match")
    while True:
        if at + 12 > len(data):
            raise ValueError("the PNG ends before its IEND chunk")
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        end = at + 8 + length
        if end + 4 > len(data):
            raise ValueError(f"the PNG's {kind!r} chunk runs past its end")
        if zlib.crc32(data[at + 4 : end]) != struct.unpack(">I", data[end : end + 4])[0]:
            raise ValueError(f"the CRC of the PNG's {kind!r} chunk does not match")
        if kind == b"IEND":
            break
        chunks.setdefault(kind, []).append(data[at + 8 : end])
        at = end + 4
    if b"IDAT" not in chunks:
        raise ValueError("the PNG has no image data (IDAT)")
    return chunks


def _inflate(compressed: bytes, expected: int) -> bytes:
    """The image data inflated: exactly ``expected`` bytes, reading no further than one past them."""
    inflater = _decompressobj()
    try:
        rows = inflater.decompress(compressed, expected + 1)
    except Exception as err:  # zlib.error / isal's IsalError: a corrupt stream
        raise ValueError(f"the PNG's image data does not inflate ({err})") from None
    if len(rows) != expected:
        raise ValueError(f"the PNG's image data holds {len(rows)} bytes where its header says {expected}")
    return rows


def _unfilter(rows: bytes, height: int, row_bytes: int) -> np.ndarray | None:
    """The rows without their filter bytes when each is "None" or "Up" (else ``None``)."""
    lines = np.frombuffer(rows, np.uint8).reshape(height, row_bytes + 1)
    filters = lines[:, 0]
    if (filters[1:] == _UP).all() and filters[0] in (_NONE, _UP):
        return _running_sum(lines[:, 1:])
    if (filters == _NONE).all():
        return lines[:, 1:]
    return None


def _running_sum(deltas: np.ndarray) -> np.ndarray:
    """Each row plus every row above it, mod 256: "Up" undone. In log2(rows) whole-array additions
    (each row adds the row ``k`` above, ``k`` doubling), 5x faster than numpy's cumsum down a column."""
    total, spare = np.array(deltas), np.empty_like(deltas)
    k = 1
    while k < total.shape[0]:
        spare[:k] = total[:k]
        np.add(total[k:], total[:-k], out=spare[k:])
        total, spare = spare, total
        k *= 2
    return total


def _pillow(data: bytes) -> Image.Image:
    try:
        image = Image.open(io.BytesIO(data), formats=["PNG"])
        image.load()
    except Exception as err:  # Pillow raises its own ways on a file it cannot read
        raise ValueError(f"the PNG does not decode ({type(err).__name__})") from None
    return image
