"""The clock face: an analog dial drawn from a time (hands at the exact angles), numerals arabic, roman
or none, an optional second hand, and a face colour drawn from the seed.

Drawn at twice the size and reduced by averaging 2x2 pixels, so hands and ticks are smooth; the bytes
depend only on the arguments.
"""

from __future__ import annotations

import math
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

#: Face colours a seed picks from; the rim, ticks, numerals and hands are dark on all of them.
FACES = ((250, 248, 240), (236, 244, 250), (250, 240, 226), (238, 248, 236), (244, 240, 250))
INK, RIM, SECOND = (30, 30, 38), (70, 70, 84), (200, 40, 40)
ROMAN = ("XII", "I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI")
SUPERSAMPLE = 2


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _point(cx: float, cy: float, turn: float, radius: float) -> tuple[float, float]:
    """The point ``radius`` from the centre at ``turn`` (0 = 12 o'clock, clockwise, 1 = a full turn)."""
    angle = 2 * math.pi * turn
    return cx + radius * math.sin(angle), cy - radius * math.cos(angle)


def _hand(draw: ImageDraw.ImageDraw, c: float, turn: float, length: float, width: float, fill: tuple) -> None:
    """A tapered hand from a little behind the centre to ``length`` along ``turn``."""
    tip = _point(c, c, turn, length)
    tail = _point(c, c, turn + 0.5, length * 0.15)
    left = _point(c, c, turn - 0.25, width / 2)
    right = _point(c, c, turn + 0.25, width / 2)
    draw.polygon([tail, left, tip, right], fill=fill)


def clock_image(minutes: int, seconds: int | None, numerals: str, face: int, size: int) -> Image.Image:
    """The dial showing ``minutes`` past 12:00 (0 to 719), with a second hand at ``seconds`` when given."""
    big = size * SUPERSAMPLE
    c, r = big / 2, big / 2 - big / 40
    image = Image.new("RGB", (big, big), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    draw.ellipse((c - r, c - r, c + r, c + r), fill=FACES[face], outline=RIM, width=max(2, big // 60))
    for tick in range(60):
        hour = tick % 5 == 0
        outer, inner = r * 0.93, r * (0.82 if hour else 0.88)
        draw.line(
            [_point(c, c, tick / 60, inner), _point(c, c, tick / 60, outer)],
            fill=INK,
            width=max(1, big // (70 if hour else 220)),
        )
    if numerals != "none":
        font = _font(max(8, int(r * (0.16 if numerals == "arabic" else 0.12))))
        for hour in range(12):
            label = str(hour or 12) if numerals == "arabic" else ROMAN[hour]
            draw.text(_point(c, c, hour / 12, r * 0.68), label, fill=INK, font=font, anchor="mm")
    _hand(draw, c, minutes / 720, r * 0.5, big / 28, INK)
    _hand(draw, c, (minutes % 60) / 60, r * 0.8, big / 45, INK)
    if seconds is not None:
        draw.line(
            [_point(c, c, seconds / 60 + 0.5, r * 0.2), _point(c, c, seconds / 60, r * 0.88)],
            fill=SECOND,
            width=max(1, big // 160),
        )
    dot = big / 40
    draw.ellipse((c - dot, c - dot, c + dot, c + dot), fill=SECOND if seconds is not None else INK)
    return image.reduce(SUPERSAMPLE)
