"""The codes' alphabet and font: Pillow's scalable default font, sized by measured ink height."""

from __future__ import annotations

import functools

from PIL import Image, ImageDraw, ImageFont

#: Upper-case letters and digits without look-alikes (no 0/O/Q/D, 1/I/L, 2/Z, 5/S, 6/G, 8/B, U/V).
ALPHABET = "ACEFHJKMNPRTWXY3479"
#: Padding around the code on its white plate, in canvas px.
PLATE_PAD = 8


def _ink_height(font: ImageFont.FreeTypeFont, text: str) -> int:
    size = font.size
    image = Image.new("1", (size * (len(text) + 1), size * 2), 0)
    draw = ImageDraw.Draw(image)
    draw.fontmode = "1"
    draw.text((size // 2, size * 3 // 2), text, fill=1, font=font, anchor="ls")
    box = image.getbbox()
    return 0 if box is None else box[3] - box[1]


@functools.lru_cache(maxsize=32)
def glyph_font(glyph_px: int, code_length: int) -> tuple[ImageFont.FreeTypeFont, int, int]:
    """The largest default-font size whose glyphs are at most ``glyph_px`` high (ink rows, measured),
    that ink height, and the width of the widest code's plate."""
    best = None
    for size in range(glyph_px, 4 * glyph_px):
        font = ImageFont.load_default(size=size)
        ink = max(_ink_height(font, ch) for ch in ALPHABET)
        if ink > glyph_px:
            break
        best = (font, ink)
    if best is None:
        raise ValueError(f"the default font has no size with glyphs at most {glyph_px} px high")
    font, ink = best
    widest = max(ALPHABET, key=lambda ch: font.getlength(ch))
    plate_width = round(font.getlength(widest * code_length)) + 2 * PLATE_PAD
    return font, ink, plate_width
