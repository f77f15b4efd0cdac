"""One frame of the animation as an image: its letter in a band on top, the box below with every object
(a ball as a disc, a box as a square) in its colour. Drawn at twice the size and reduced by averaging 2x2
pixels, so edges are smooth; the bytes depend only on the arguments."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.frame_order.generator import COLOURS
from vlm_envs.envs.frame_order.motion import WORLD, Body, Vec

BACKGROUND, FLOOR, WALL, INK, OUTLINE = (
    (255, 255, 255),
    (244, 242, 236),
    (60, 60, 70),
    (20, 20, 28),
    (25, 25, 25),
)
SUPERSAMPLE = 2


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def band_height(frame_size: int) -> int:
    """Height of the band that holds a frame's letter, in pixels."""
    return max(16, frame_size // 5)


def frame_image(
    bodies: Sequence[Body], positions: Sequence[Vec], letter: str, frame_size: int
) -> Image.Image:
    """The frame showing ``bodies`` at ``positions`` under ``letter``: ``frame_size`` wide, the band
    above the box."""
    band = band_height(frame_size)
    s = SUPERSAMPLE
    image = Image.new("RGB", (frame_size * s, (frame_size + band) * s), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text(
        (frame_size * s / 2, band * s / 2), letter, fill=INK, font=_font(int(band * s * 0.8)), anchor="mm"
    )
    top = band * s
    scale = frame_size * s / WORLD
    wall = max(2, frame_size * s // 80)
    draw.rectangle(
        (0, top, frame_size * s - 1, top + frame_size * s - 1), fill=FLOOR, outline=WALL, width=wall
    )
    for body, (x, y) in zip(bodies, positions, strict=True):
        r = body.radius * scale
        cx, cy = x * scale, top + y * scale
        box = (cx - r, cy - r, cx + r, cy + r)
        if body.shape == "ball":
            draw.ellipse(box, fill=COLOURS[body.colour], outline=OUTLINE, width=max(1, s))
        else:
            draw.rectangle(box, fill=COLOURS[body.colour], outline=OUTLINE, width=max(1, s))
    return image.reduce(s)
