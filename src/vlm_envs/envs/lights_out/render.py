"""Lights Out's views: the board as an image (lit and dark squares, column letters on top, row numbers on
the left) and as text (``O`` on, ``.`` off, with the same labels)."""

from __future__ import annotations

import string
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

BACKGROUND, LABEL = (30, 32, 40), (210, 210, 220)
ON, ON_CORE, OFF = (240, 190, 40), (255, 236, 140), (62, 68, 86)


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


@lru_cache(maxsize=8)
def _frame(n: int, cell_px: int) -> Image.Image:
    """The empty board with its labels (drawn once per size)."""
    margin = cell_px // 2
    side = margin + n * cell_px
    image = Image.new("RGB", (side, side), BACKGROUND)
    draw = ImageDraw.Draw(image)
    font = _font(max(10, cell_px * 3 // 8))
    for i in range(n):
        centre = margin + i * cell_px + cell_px // 2
        draw.text((centre, margin // 2), string.ascii_uppercase[i], fill=LABEL, font=font, anchor="mm")
        draw.text((margin // 2, centre), str(i + 1), fill=LABEL, font=font, anchor="mm")
    return image


def board_image(n: int, lights: int, cell_px: int) -> Image.Image:
    """The board: a yellow square for each light that is on, a slate one for each that is off."""
    image = _frame(n, cell_px).copy()
    draw = ImageDraw.Draw(image)
    margin, pad = cell_px // 2, max(2, cell_px // 12)
    radius = max(2, cell_px // 8)
    for cell in range(n * n):
        r, c = divmod(cell, n)
        x0, y0 = margin + c * cell_px + pad, margin + r * cell_px + pad
        x1, y1 = x0 + cell_px - 2 * pad - 1, y0 + cell_px - 2 * pad - 1
        on = lights >> cell & 1
        draw.rounded_rectangle((x0, y0, x1, y1), radius=radius, fill=ON if on else OFF)
        if on:
            inset = cell_px // 4
            draw.ellipse((x0 + inset, y0 + inset, x1 - inset, y1 - inset), fill=ON_CORE)
    return image


def board_text(n: int, lights: int) -> str:
    """The board as text: a header of column letters, then each row's number and its lights."""
    lines = ["  " + " ".join(string.ascii_uppercase[:n])]
    for r in range(n):
        marks = ["O" if lights >> (r * n + c) & 1 else "." for c in range(n)]
        lines.append(f"{r + 1} " + " ".join(marks))
    return "\n".join(lines)
