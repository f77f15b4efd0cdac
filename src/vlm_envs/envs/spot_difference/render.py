"""Drawing a scene's images: a palette canvas at ``SCALE`` times the image size (no anti-aliasing, text in
font mode "1", so the same Pillow gives the same bytes in any process), box-averaged to the image the model
sees; zoom crops come from the canvas. The grid's lines and labels are the same in every image."""

from __future__ import annotations

import functools
import math
import string
from typing import NamedTuple

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.spot_difference.config import LABEL_MARGIN, MIN_CHANNEL_STEP, SpotDifferenceConfig
from vlm_envs.envs.spot_difference.scene import COLOR_NAMES, COLORS, SCALE, Scene, SceneObject, cell_box

WHITE, LINE, LABEL = 0, 1, 2
_PALETTE = [255, 255, 255, 222, 222, 222, 150, 150, 150] + [v for name in COLOR_NAMES for v in COLORS[name]]
_INDEX = {name: 3 + i for i, name in enumerate(COLOR_NAMES)}
RESAMPLE = Image.Resampling.BILINEAR


def _shape(draw: ImageDraw.ImageDraw, obj: SceneObject) -> None:
    x0, y0, x1, y1 = obj.box[0], obj.box[1], obj.box[2] - 1, obj.box[3] - 1
    cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
    fill = _INDEX[obj.color]
    if obj.shape == "circle":
        draw.ellipse([x0, y0, x1, y1], fill=fill)
    elif obj.shape == "square":
        inset = round(r * 0.1)
        draw.rectangle([x0 + inset, y0 + inset, x1 - inset, y1 - inset], fill=fill)
    elif obj.shape == "triangle":
        draw.polygon([(cx, y0), (x1, y1), (x0, y1)], fill=fill)
    elif obj.shape == "diamond":
        draw.polygon([(cx, y0), (x1, cy), (cx, y1), (x0, cy)], fill=fill)
    else:  # hexagon
        draw.polygon(
            [(cx + r * math.cos(a * math.pi / 3), cy + r * math.sin(a * math.pi / 3)) for a in range(6)],
            fill=fill,
        )


@functools.lru_cache(maxsize=16)
def _grid_canvas(config: SpotDifferenceConfig) -> Image.Image:
    """The empty canvas: faint cell lines, column letters above, row numbers at the left."""
    side = config.image_size * SCALE
    canvas = Image.new("P", (side, side), WHITE)
    canvas.putpalette(_PALETTE)
    draw = ImageDraw.Draw(canvas)
    draw.fontmode = "1"
    font = ImageFont.load_default(size=LABEL_MARGIN * SCALE * 2 // 3)
    n, m = config.grid, LABEL_MARGIN * SCALE
    end = cell_box(config, n * n - 1)[2]
    for k in range(n + 1):
        at = m + k * config.cell_px * SCALE
        draw.rectangle([at - 1, m - 1, at, end], fill=LINE)
        draw.rectangle([m - 1, at - 1, end, at], fill=LINE)
    for k in range(n):
        x0, y0, x1, y1 = cell_box(config, k * n + k)
        draw.text(((x0 + x1) / 2, m / 2), string.ascii_uppercase[k], fill=LABEL, font=font, anchor="mm")
        draw.text((m / 2, (y0 + y1) / 2), str(k + 1), fill=LABEL, font=font, anchor="mm")
    return canvas


def draw_canvas(scene: Scene, copy: int, config: SpotDifferenceConfig) -> Image.Image:
    """The full-size palette canvas of image ``copy`` (0 the original)."""
    canvas = _grid_canvas(config).copy()
    draw = ImageDraw.Draw(canvas)
    for _, obj in scene.image_objects(copy):
        _shape(draw, obj)
    return canvas


def view(canvas: Image.Image) -> Image.Image:
    """The image the model sees: the canvas box-averaged by ``SCALE``."""
    return canvas.convert("RGB").reduce(SCALE)


class CellChanges(NamedTuple):
    """How an altered image differs from the original, per cell (row-major): ``strong`` pixels changed by
    at least ``MIN_CHANNEL_STEP`` in a channel, ``touched`` pixels changed at all, and ``outside`` pixels
    changed outside every cell (the grid's lines and labels)."""

    strong: np.ndarray
    touched: np.ndarray
    outside: int


def changed_pixels(original: Image.Image, other: Image.Image, config: SpotDifferenceConfig) -> CellChanges:
    """Where image ``other`` differs from ``original`` (both as the model sees them)."""
    a, b = np.asarray(original), np.asarray(other)
    diff = np.maximum(a, b) - np.minimum(a, b)  # uint8, no overflow
    delta = np.maximum(np.maximum(diff[..., 0], diff[..., 1]), diff[..., 2])
    n, side = config.grid, config.cell_px
    top = LABEL_MARGIN
    cells = delta[top : top + n * side, top : top + n * side].reshape(n, side, n, side)
    strong = (cells >= MIN_CHANNEL_STEP).sum(axis=(1, 3)).ravel()
    touched = (cells > 0).sum(axis=(1, 3)).ravel()
    return CellChanges(strong, touched, int(np.count_nonzero(delta)) - int(touched.sum()))


def crop(
    canvas: Image.Image, box: tuple[float, float, float, float], config: SpotDifferenceConfig
) -> Image.Image:
    """The image-px ``box`` of a canvas, at full resolution, scaled to fit ``crop_view``."""
    region = tuple(round(v * SCALE) for v in box)
    part = canvas.crop(region).convert("RGB")
    fit = config.crop_view / max(part.width, part.height)
    size = (max(1, round(part.width * fit)), max(1, round(part.height * fit)))
    return part.resize(size, RESAMPLE)
