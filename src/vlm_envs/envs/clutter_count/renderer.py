"""The picture of a scene, read off its owner map (each pixel the colour of the object on top, or its
outline), and the picture with the marks placed so far drawn on it as numbered dots."""

from __future__ import annotations

import functools

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.clutter_count.generator import Scene
from vlm_envs.envs.clutter_count.shapes import BACKGROUND, COLORS, OUTLINE

#: A mark's dot radius and its number's font size, in px.
DOT = 4
LABEL_PX = 12
#: The palette index of the outline (objects take 1 to 254).
OUTLINE_INDEX = 255


def draw_picture(scene: Scene) -> Image.Image:
    """The scene as an RGB picture: every pixel the fill or outline of its owner, else the background
    (through a palette image: index 0 the background, 1.. the objects in draw order, 255 the outline)."""
    index = (scene.owner + 1).astype(np.uint8)
    index[scene.rim & (scene.owner >= 0)] = OUTLINE_INDEX
    palette = [*BACKGROUND, *(v for p in scene.pieces for v in COLORS[p.color])]
    palette += [0, 0, 0] * (OUTLINE_INDEX - len(palette) // 3) + list(OUTLINE)
    picture = Image.frombytes("P", (index.shape[1], index.shape[0]), index.tobytes())
    picture.putpalette(palette)
    return picture.convert("RGB")


@functools.lru_cache(maxsize=1)
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=LABEL_PX)


def draw_marks(picture: Image.Image, marks: list[tuple[int, int]]) -> Image.Image:
    """``picture`` with each mark (a pixel) as a white-ringed black dot numbered from 1, up and right of it
    (inside the picture)."""
    out = picture.copy()
    draw = ImageDraw.Draw(out)
    font = _font()
    width, height = out.size
    for number, (x, y) in enumerate(marks, start=1):
        draw.ellipse([x - DOT, y - DOT, x + DOT, y + DOT], fill=(0, 0, 0), outline=(255, 255, 255), width=1)
        text = str(number)
        left, top, right, bottom = draw.textbbox((0, 0), text, font=font, stroke_width=2)
        tx = min(max(0, x + DOT + 1), width - (right - left))
        ty = min(max(0, y - DOT - (bottom - top)), height - (bottom - top))
        draw.text(
            (tx - left, ty - top),
            text,
            font=font,
            fill=(0, 0, 0),
            stroke_width=2,
            stroke_fill=(255, 255, 255),
        )
    return out
