"""Drawing a scene once per reset on a palette canvas, its scaled view, and cheap crops of it.

The canvas is a palette ("P") image drawn without anti-aliasing (text in font mode "1"), so the same
Pillow and font give the same bytes in any process. The view is the canvas box-averaged by the integer
scale: objects sit on whole view pixels, so each object's tile is reduced alone and pasted on a white
view, which equals reducing the whole canvas at a fraction of the cost. Crops are resized with one fixed
filter (bilinear).
"""

from __future__ import annotations

import math

from PIL import Image, ImageDraw

from vlm_envs.envs.zoom_search.config import ZoomSearchConfig
from vlm_envs.envs.zoom_search.generator import COLOR_NAMES, COLORS, Scene, SceneObject
from vlm_envs.envs.zoom_search.glyphs import ALPHABET, PLATE_PAD, glyph_font

WHITE, INK = 0, 1
_PALETTE = [255, 255, 255, 20, 20, 20] + [v for name in COLOR_NAMES for v in COLORS[name]]
_INDEX = {name: 2 + i for i, name in enumerate(COLOR_NAMES)}
RESAMPLE = Image.Resampling.BILINEAR


def _shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], fill: int) -> None:
    x0, y0, x1, y1 = box[0], box[1], box[2] - 1, box[3] - 1
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    if shape == "circle":
        draw.ellipse([x0, y0, x1, y1], fill=fill)
    elif shape == "square":
        inset = round(r * 0.1)
        draw.rectangle([x0 + inset, y0 + inset, x1 - inset, y1 - inset], fill=fill)
    elif shape == "triangle":
        draw.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=fill)
    elif shape == "diamond":
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=fill)
    else:  # hexagon
        draw.polygon(
            [(cx + r * math.cos(a * math.pi / 3), cy + r * math.sin(a * math.pi / 3)) for a in range(6)],
            fill=fill,
        )


def plate_box(obj: SceneObject, config: ZoomSearchConfig) -> tuple[int, int, int, int]:
    """The white plate holding the code, in canvas px: centred (lower on a triangle), its text's ink top on
    a multiple of the scale, so the glyphs cover as few view rows as their height allows."""
    font, ink, _ = glyph_font(config.glyph_px, config.code_length)
    width = round(font.getlength(obj.code)) + 2 * PLATE_PAD
    height = ink + 2 * PLATE_PAD
    x0, y0, x1, y1 = obj.box
    cy = y0 + (y1 - y0) * (0.68 if obj.shape == "triangle" else 0.5)
    s = config.scale
    top = (int(cy - height / 2) + PLATE_PAD) // s * s - PLATE_PAD
    left = (x0 + x1 - width) // 2
    return left, top, left + width, top + height


def draw_canvas(scene: Scene, config: ZoomSearchConfig) -> Image.Image:
    """The full-size palette canvas of ``scene``."""
    canvas = Image.new("P", (config.canvas, config.canvas), WHITE)
    canvas.putpalette(_PALETTE)
    draw = ImageDraw.Draw(canvas)
    draw.fontmode = "1"
    font, ink, _ = glyph_font(config.glyph_px, config.code_length)
    for obj in scene.objects:
        _shape(draw, obj.shape, obj.box, _INDEX[obj.color])
        left, top, right, bottom = plate_box(obj, config)
        draw.rectangle([left, top, right - 1, bottom - 1], fill=WHITE, outline=INK)
        draw.text((left + PLATE_PAD, top + PLATE_PAD + ink), obj.code, fill=INK, font=font, anchor="ls")
    return canvas


def draw_view(canvas: Image.Image, scene: Scene, config: ZoomSearchConfig) -> Image.Image:
    """The canvas box-averaged to ``view`` x ``view`` RGB (one object tile at a time)."""
    s = config.scale
    view = Image.new("RGB", (config.view, config.view), "white")
    for obj in scene.objects:
        tile = canvas.crop(obj.box).convert("RGB").reduce(s)
        view.paste(tile, (obj.box[0] // s, obj.box[1] // s))
    return view


def crop(
    canvas: Image.Image, view: Image.Image, box: tuple[float, float, float, float], config: ZoomSearchConfig
) -> Image.Image:
    """The view-frame ``box`` of the scene, scaled to fit ``crop_view`` (from the view when it would only
    shrink there anyway, else from the full-resolution canvas)."""
    x0, y0, x1, y1 = box
    side = max(x1 - x0, y1 - y0)
    if side >= config.crop_view:
        source, k = view, 1
    else:
        source, k = canvas, config.scale
    region = (round(x0 * k), round(y0 * k), round(x1 * k), round(y1 * k))
    part = source.crop(region).convert("RGB")
    fit = config.crop_view / max(part.width, part.height)
    size = (max(1, round(part.width * fit)), max(1, round(part.height * fit)))
    return part.resize(size, RESAMPLE)


def glyph_alphabet() -> str:
    """The characters codes are made of."""
    return ALPHABET
