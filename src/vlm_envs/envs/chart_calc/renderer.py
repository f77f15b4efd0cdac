"""Drawing a :class:`ChartTable` with Pillow: every value is printed as a label next to its mark."""

from __future__ import annotations

import functools
import math

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.chart_calc.generator import ChartTable

_SERIES_COLORS = ((52, 101, 164), (230, 126, 34), (46, 139, 87), (155, 89, 182))
_PIE_COLORS = (
    (52, 101, 164),
    (230, 126, 34),
    (46, 139, 87),
    (155, 89, 182),
    (192, 57, 43),
    (22, 160, 133),
    (241, 196, 15),
    (127, 140, 141),
)
_GRID, _AXIS, _TEXT = (220, 220, 220), (90, 90, 90), (20, 20, 20)
#: The y axis always spans 0..100 with labelled gridlines every 20 (values are 12..99).
_Y_MAX, _Y_STEP = 100, 20


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _text(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, anchor: str) -> None:
    draw.text(xy, text, fill=_TEXT, font=_font(size), anchor=anchor, stroke_width=2, stroke_fill="white")


def render_chart(table: ChartTable, size: tuple[int, int]) -> Image.Image:
    """The chart of ``table`` as an RGB image of ``size`` (width, height)."""
    width, height = size
    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    unit = f" ({table.unit})" if table.unit and table.kind != "pie" else ""
    _text(draw, (width / 2, 14), table.title + unit, max(16, height // 24), "mt")
    if table.kind == "pie":
        _pie(draw, table, width, height)
    else:
        _axes_chart(draw, table, width, height)
    return image


def _axes_chart(draw: ImageDraw.ImageDraw, table: ChartTable, width: int, height: int) -> None:
    left, right, top, bottom = 56, width - 20, 64 + 18 * (len(table.series) > 1), height - 44
    label_size = max(12, height // 34)

    def y_of(value: float) -> float:
        return bottom - (bottom - top) * value / _Y_MAX

    for tick in range(0, _Y_MAX + 1, _Y_STEP):
        y = y_of(tick)
        draw.line([(left, y), (right, y)], fill=_GRID if tick else _AXIS, width=1)
        _text(draw, (left - 6, y), str(tick), label_size, "rm")
    n = len(table.categories)
    slot = (right - left) / n
    for c, name in enumerate(table.categories):
        _text(draw, (left + slot * (c + 0.5), bottom + 8), name, label_size, "mt")
    if table.kind == "line":
        points = [(left + slot * (c + 0.5), y_of(v)) for c, v in enumerate(table.values[0])]
        draw.line(points, fill=_SERIES_COLORS[0], width=3)
        row = table.values[0]
        for c, (x, y) in enumerate(points):
            draw.ellipse([x - 5, y - 5, x + 5, y + 5], fill=_SERIES_COLORS[0])
            neighbours = [row[i] for i in (c - 1, c + 1) if 0 <= i < n]
            valley = all(v > row[c] for v in neighbours)  # the line leaves upwards: label below the point
            _text(draw, (x, y + 9 if valley else y - 9), str(row[c]), label_size, "mt" if valley else "mb")
        return
    k = len(table.series)
    bar = slot * 0.8 / k
    for s, row in enumerate(table.values):
        for c, value in enumerate(row):
            x0 = left + slot * c + slot * 0.1 + bar * s
            draw.rectangle([x0 + 1, y_of(value), x0 + bar - 1, bottom], fill=_SERIES_COLORS[s])
            _text(draw, (x0 + bar / 2, y_of(value) - 3), str(value), label_size, "mb")
    if k > 1:
        x = left
        for s, name in enumerate(table.series):
            draw.rectangle([x, top - 30, x + 14, top - 16], fill=_SERIES_COLORS[s])
            _text(draw, (x + 20, top - 23), name, label_size, "lm")
            x += 90


def _pie(draw: ImageDraw.ImageDraw, table: ChartTable, width: int, height: int) -> None:
    cx, cy = width / 2, (height + 40) / 2
    radius = min(width, height - 40) * 0.3
    label_size = max(13, height // 32)
    start = -90.0
    for c, (name, value) in enumerate(zip(table.categories, table.values[0], strict=True)):
        sweep = 360.0 * value / 100
        box = [cx - radius, cy - radius, cx + radius, cy + radius]
        draw.pieslice(box, start, start + sweep, fill=_PIE_COLORS[c % len(_PIE_COLORS)], outline="white")
        mid = math.radians(start + sweep / 2)
        x, y = cx + math.cos(mid) * radius * 1.18, cy + math.sin(mid) * radius * 1.18
        anchor = "lm" if math.cos(mid) > 0.2 else "rm" if math.cos(mid) < -0.2 else "mm"
        _text(draw, (x, y), f"{name} {value}%", label_size, anchor)
        start += sweep
