"""A PNG writer over numpy for every mode PNG stores, several times faster than Pillow's encoder.

Rows are filtered with PNG's "Up" filter (each byte minus the one above it; the first row is kept as it
is, "Up" against a zero row) and deflated in one call: by isa-l (the ``isal`` package, in the ``serve``
and ``rollout`` extras) where it is installed, else by the standard library's zlib, chosen once at import
(:data:`BACKEND`). The bytes differ from Pillow's; the pixels they decode to are the image's.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image

#: Deflate levels, measured on every env's "Up"-filtered frames: isa-l's level 2 gives the bytes of its
#: level 1 a little faster (level 0: about 1.3x the bytes; level 3: 10x the time); zlib's level 3 costs
#: about 3% more time than its level 1 for about 5% fewer bytes.
ISAL_LEVEL = 2
ZLIB_LEVEL = 3

#: Mode -> (bit depth, PNG colour type) for the modes PNG stores as they are. "I" (32-bit ints) goes as
#: 16-bit greyscale when every value lies in 0..65535 (Pillow decodes it as "I;16").
_LAYOUTS: dict[str, tuple[int, int]] = {
    "1": (1, 0),
    "L": (8, 0),
    "LA": (8, 4),
    "I": (16, 0),
    "I;16": (16, 0),
    "P": (8, 3),
    "RGB": (8, 2),
    "RGBA": (8, 6),
}
#: The image modes PNG stores as they are.
PNG_MODES = frozenset(_LAYOUTS)

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_UP = 2  # PNG filter type "Up"


def _deflate() -> tuple[str, Callable[[Any, int], bytes], int]:
    try:
        from isal import isal_zlib
    except ImportError:
        return "zlib", zlib.compress, ZLIB_LEVEL
    return "isal", isal_zlib.compress, ISAL_LEVEL


#: The deflate that runs ("isal" or "zlib") and the function and level it runs with.
BACKEND, _compress, LEVEL = _deflate()


def encode_png(image: Image.Image) -> bytes:
    """``image`` as PNG bytes that decode to exactly its pixels (its mode, size, palette, transparency).

    Raises ``ValueError`` for a mode outside :data:`PNG_MODES`, an empty image (PNG has none), or an
    "I" image with a value outside 0..65535 (PNG stores at most 16 bits).
    """
    if image.mode not in _LAYOUTS:
        raise ValueError(f"PNG cannot store mode {image.mode!r} as it is; convert it first")
    width, height = image.size
    if width == 0 or height == 0:
        raise ValueError(f"PNG cannot store an empty image ({width}x{height})")
    depth, colour = _LAYOUTS[image.mode]
    chunks = []
    if image.mode == "P":
        rows, depth, palette, alpha = _palette_rows(image)
        chunks.append(_chunk(b"PLTE", palette))
        if alpha:
            chunks.append(_chunk(b"tRNS", alpha))
    else:
        rows = _rows(image)
        if (key := _transparent_key(image, depth)) is not None:
            chunks.append(_chunk(b"tRNS", key))
    return _file(width, depth, colour, chunks, rows)


def encode_indexed(rows: np.ndarray, width: int, depth: int, palette: bytes) -> bytes:
    """A palette PNG from rows of indices already packed at ``depth`` bits (uint8, one row per line),
    for an env that draws its frames as palette indices; ``palette`` is the PLTE data (RGB triples)."""
    return _file(width, depth, _LAYOUTS["P"][1], [_chunk(b"PLTE", palette)], rows)


def is_truecolour(png: bytes) -> bool:
    """Whether ``png`` (a PNG file's bytes) holds 8-bit RGB, from its header."""
    return png[24:26] == b"\x08\x02"


def _file(width: int, depth: int, colour: int, chunks: list[bytes], rows: np.ndarray) -> bytes:
    """The PNG file: header, ``chunks`` (palette, transparency), the deflated ``rows``, end."""
    header = struct.pack(">IIBBBBB", width, rows.shape[0], depth, colour, 0, 0, 0)
    return b"".join(
        [_SIGNATURE, _chunk(b"IHDR", header), *chunks, _chunk(b"IDAT", _idat(rows)), _chunk(b"IEND", b"")]
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(data, zlib.crc32(kind)))


def _idat(rows: np.ndarray) -> bytes:
    """The compressed data of ``rows`` (uint8, one row of PNG bytes each), every row filtered with "Up"."""
    filtered = np.empty((rows.shape[0], rows.shape[1] + 1), np.uint8)
    filtered[:, 0] = _UP
    filtered[0, 1:] = rows[0]
    np.subtract(rows[1:], rows[:-1], out=filtered[1:, 1:])
    return _compress(filtered, LEVEL)


def _rows(image: Image.Image) -> np.ndarray:
    """The image's rows as PNG lays them out (uint8): bits packed for "1", 16-bit big-endian for "I"s."""
    width, height = image.size
    if image.mode == "1":  # Pillow's raw "1" is PNG's 1-bit greyscale: rows packed, first pixel high
        return np.frombuffer(image.tobytes(), np.uint8).reshape(height, (width + 7) // 8)
    if image.mode in ("I", "I;16"):
        values = np.asarray(image)
        if image.mode == "I" and (values.min() < 0 or values.max() > 0xFFFF):
            raise ValueError(
                f"PNG stores at most 16 bits: this 'I' image holds {values.min()}..{values.max()}, "
                "outside 0..65535"
            )
        return values.astype(">u2").view(np.uint8).reshape(height, 2 * width)
    return np.frombuffer(image.tobytes(), np.uint8).reshape(height, -1)


def _palette_rows(image: Image.Image) -> tuple[np.ndarray, int, bytes, bytes]:
    """Rows, bit depth, PLTE and tRNS data of a "P" image.

    The palette holds every index a pixel uses (entries the image's palette lacks are black, as Pillow
    shows them); the bit depth is the least of 1, 2, 4, 8 that holds the palette's indices.
    """
    indices = np.frombuffer(image.tobytes(), np.uint8).reshape(image.height, image.width)
    rgb = bytes(image.getpalette("RGB") or b"")[: 256 * 3]
    entries = max(len(rgb) // 3, int(indices.max()) + 1)
    palette = rgb[: entries * 3].ljust(entries * 3, b"\0")
    depth = next(bits for bits in (1, 2, 4, 8) if entries <= 1 << bits)
    return _pack(indices, depth), depth, palette, _palette_alpha(image, entries)


def _palette_alpha(image: Image.Image, entries: int) -> bytes:
    """tRNS data of a "P" image, each entry's alpha as Pillow's ``convert("RGBA")`` gives it: an RGBA
    palette's alpha, overridden by ``info["transparency"]`` (an index, or leading entries' alphas);
    empty where every entry is opaque."""
    alpha = bytearray(b"\xff" * entries)
    if image.palette is not None and image.palette.mode == "RGBA":
        own = bytes(image.getpalette("RGBA") or b"")[3::4][:entries]
        alpha[: len(own)] = own
    transparency = image.info.get("transparency")
    if isinstance(transparency, bytes):
        alpha[: min(len(transparency), entries)] = transparency[:entries]
    elif isinstance(transparency, int) and 0 <= transparency < entries:
        alpha[transparency] = 0
    return bytes(alpha).rstrip(b"\xff")


def _pack(indices: np.ndarray, bits: int) -> np.ndarray:
    """Rows of values below ``2**bits`` packed ``8 // bits`` to a byte, the first in the high bits."""
    if bits == 8:
        return indices
    per_byte = 8 // bits
    height, width = indices.shape
    padded = np.zeros((height, -(-width // per_byte) * per_byte), np.uint8)
    padded[:, :width] = indices
    shifts = np.arange(8 - bits, -1, -bits, dtype=np.uint8)
    return np.bitwise_or.reduce(padded.reshape(height, -1, per_byte) << shifts, axis=2)


def _transparent_key(image: Image.Image, depth: int) -> bytes | None:
    """tRNS data for a greyscale or RGB image whose ``info["transparency"]`` names a colour PNG can
    mark (a grey level within the bit depth, an 8-bit RGB triple); ``None`` otherwise."""
    key = image.info.get("transparency")
    if image.mode in ("1", "L", "I", "I;16") and _is_level(key, (1 << depth) - 1):
        return struct.pack(">H", key)
    if (
        image.mode == "RGB"
        and isinstance(key, tuple | list)
        and len(key) == 3
        and all(_is_level(v, 255) for v in key)
    ):
        return struct.pack(">HHH", *key)
    return None


def _is_level(value: Any, top: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top
