"""Names on the map, fast: each letter is drawn once per process and size (Pillow's bundled font), every
name of a map is laid out letter by letter into one ink layer, and the white outline around all of them is
that layer spread by two pixels, painted under the ink in one go.

Pillow's stroked text costs milliseconds a name on these machines, and a map holds up to a hundred names; this
costs a fraction of that, and the bytes still depend only on the names, the size and where they go.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: Pixels the white outline adds on each side of a name's ink.
HALO_PX = 2
#: Margin around a letter's pen position in its cached mask.
_PAD = 2

Box = tuple[int, int, int, int]


@functools.lru_cache(maxsize=8)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's bundled font at ``size`` pixels."""
    return ImageFont.load_default(size=size)


@dataclasses.dataclass(frozen=True)
class _Glyph:
    mask: np.ndarray  # uint8 ink; the pen (left end of the baseline) at (_PAD, ascent + _PAD)
    advance: float
    ink: Box | None  # the ink's box in the mask, None for a space


@functools.lru_cache(maxsize=1024)
def _glyph(char: str, size: int) -> _Glyph:
    face = font(size)
    ascent, descent = face.getmetrics()
    advance = face.getlength(char)
    image = Image.new("L", (int(advance) + 3 * _PAD + 2, ascent + descent + 2 * _PAD))
    ImageDraw.Draw(image).text((_PAD, ascent + _PAD), char, font=face, fill=255, anchor="ls")
    return _Glyph(np.asarray(image), advance, image.getbbox())


def _pens(text: str, size: int) -> list[tuple[int, _Glyph]]:
    """Each letter with the x of its pen, the text's pen starting at 0."""
    out, x = [], 0.0
    for char in text:
        glyph = _glyph(char, size)
        out.append((round(x), glyph))
        x += glyph.advance
    return out


@functools.lru_cache(maxsize=2048)
def ink_box(text: str, size: int) -> Box:
    """The box of ``text``'s ink and outline, relative to its pen (the left end of its baseline)."""
    ascent = font(size).getmetrics()[0]
    boxes = [
        (x - _PAD + g.ink[0], g.ink[1] - ascent - _PAD, x - _PAD + g.ink[2], g.ink[3] - ascent - _PAD)
        for x, g in _pens(text, size)
        if g.ink is not None
    ]
    if not boxes:
        return (0, 0, 1, 1)
    left, top = min(b[0] for b in boxes), min(b[1] for b in boxes)
    right, bottom = max(b[2] for b in boxes), max(b[3] for b in boxes)
    return (left - HALO_PX, top - HALO_PX, right + HALO_PX, bottom + HALO_PX)


class Lettering:
    """One layer of text over an image of ``size`` (width, height): :meth:`write`, then :meth:`paint`."""

    def __init__(self, size: tuple[int, int]):
        self.ink = np.zeros((size[1], size[0]), dtype=np.uint8)
        self._boxes: list[Box] = []

    def write(self, text: str, size: int, top_left: tuple[int, int]) -> None:
        """``text`` at ``size`` pixels with the top left of its :func:`ink_box` at ``top_left``."""
        box = ink_box(text, size)
        ascent = font(size).getmetrics()[0]
        pen_x, pen_y = top_left[0] - box[0], top_left[1] - box[1]
        height, width = self.ink.shape
        right, bottom = top_left[0] + box[2] - box[0], top_left[1] + box[3] - box[1]
        self._boxes.append((max(top_left[0], 0), max(top_left[1], 0), min(right, width), min(bottom, height)))
        for x, glyph in _pens(text, size):
            if glyph.ink is None:
                continue
            left, top = pen_x + x - _PAD, pen_y - ascent - _PAD
            rows, cols = glyph.mask.shape
            y0, y1, x0, x1 = max(top, 0), min(top + rows, height), max(left, 0), min(left + cols, width)
            if y0 >= y1 or x0 >= x1:
                continue
            region = self.ink[y0:y1, x0:x1]
            np.maximum(region, glyph.mask[y0 - top : y1 - top, x0 - left : x1 - left], out=region)

    def paint(self, image: Image.Image, color: tuple[int, int, int]) -> None:
        """Every name written onto ``image`` (RGB) in ``color`` over a white outline of :data:`HALO_PX` pixels
        (the ink spread over a square; blended with integer arithmetic, so the bytes are the same everywhere),
        box by box: a whole-image blend or paste is slow."""
        outline = _spread(_spread(self.ink, axis=1), axis=0)
        ink = np.asarray(color, dtype=np.int32)
        for left, top, right, bottom in self._boxes:
            if left >= right or top >= bottom:
                continue
            halo = outline[top:bottom, left:right, None].astype(np.int32)
            alpha = self.ink[top:bottom, left:right, None].astype(np.int32)
            pixels = np.asarray(image.crop((left, top, right, bottom)), dtype=np.int32)
            pixels = (pixels * (255 - halo) + 255 * halo + 127) // 255
            pixels = (pixels * (255 - alpha) + ink * alpha + 127) // 255
            image.paste(Image.fromarray(pixels.astype(np.uint8), "RGB"), (left, top))


def _spread(layer: np.ndarray, axis: int) -> np.ndarray:
    """``layer`` with each pixel the largest within :data:`HALO_PX` along ``axis``."""
    out = layer.copy()
    for shift in range(1, HALO_PX + 1):
        ahead = [slice(None)] * 2
        behind = [slice(None)] * 2
        ahead[axis], behind[axis] = slice(shift, None), slice(None, -shift)
        np.maximum(out[tuple(ahead)], layer[tuple(behind)], out=out[tuple(ahead)])
        np.maximum(out[tuple(behind)], layer[tuple(ahead)], out=out[tuple(behind)])
    return out
