"""Minesweeper's views: the field as an image (column letters on top, row numbers on the left, raised grey
hidden cells, numbers in the classic colours) or as a text grid. Mines show only once one is hit."""

from __future__ import annotations

import functools
import string
from collections.abc import Set

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.minesweeper.board import Cell, Field

BACK, HIDDEN, LIGHT, SHADE, OPEN, LINE, LABEL = (
    (250, 250, 250),
    (176, 180, 188),
    (236, 238, 242),
    (104, 108, 116),
    (222, 222, 218),
    (168, 168, 164),
    (60, 60, 60),
)
NUMBER_COLORS = {
    1: (20, 60, 220),
    2: (20, 130, 40),
    3: (210, 30, 30),
    4: (20, 20, 130),
    5: (130, 20, 20),
    6: (10, 130, 130),
    7: (0, 0, 0),
    8: (110, 110, 110),
}
BLAST = (236, 60, 50)


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _centered(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], text: str, size: int, fill) -> None:
    font = _font(size)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    x = box[0] + (box[2] - box[0] - (right - left)) // 2 - left
    y = box[1] + (box[3] - box[1] - (bottom - top)) // 2 - top
    draw.text((x, y), text, font=font, fill=fill)


@functools.lru_cache(maxsize=64)
def _tile(kind: str, size: int) -> Image.Image:
    """One cell: ``hidden``, ``0``-``8`` (revealed), ``mine`` or ``blast`` (the mine that was hit)."""
    image = Image.new("RGB", (size, size), OPEN)
    draw = ImageDraw.Draw(image)
    edge = max(2, size // 10)
    if kind == "hidden":
        draw.rectangle((0, 0, size - 1, size - 1), fill=SHADE)
        draw.polygon([(0, 0), (size - 1, 0), (0, size - 1)], fill=LIGHT)
        draw.rectangle((edge, edge, size - 1 - edge, size - 1 - edge), fill=HIDDEN)
        return image
    draw.rectangle((0, 0, size - 1, size - 1), outline=LINE, fill=BLAST if kind == "blast" else OPEN)
    if kind in ("mine", "blast"):
        r = size // 4
        draw.ellipse((size // 2 - r, size // 2 - r, size // 2 + r, size // 2 + r), fill=(20, 20, 20))
    elif kind != "0":
        _centered(draw, (0, 0, size, size), kind, max(8, size * 3 // 5), NUMBER_COLORS[int(kind)])
    return image


def field_image(field: Field, revealed: Set[Cell], hit: Cell | None, cell: int) -> Image.Image:
    """The field as the player sees it; with ``hit`` (a mine was revealed) every mine shows."""
    margin = max(14, cell * 3 // 4)
    image = Image.new("RGB", (margin + field.cols * cell + 2, margin + field.rows * cell + 2), BACK)
    draw = ImageDraw.Draw(image)
    for c in range(field.cols):
        box = (margin + c * cell, 0, margin + (c + 1) * cell, margin)
        _centered(draw, box, string.ascii_uppercase[c], max(8, margin * 3 // 5), LABEL)
    for r in range(field.rows):
        _centered(
            draw,
            (0, margin + r * cell, margin, margin + (r + 1) * cell),
            str(r + 1),
            max(8, margin * 3 // 5),
            LABEL,
        )
    for at in range(field.rows * field.cols):
        r, c = divmod(at, field.cols)
        image.paste(_tile(_kind(field, revealed, hit, at), cell), (margin + c * cell, margin + r * cell))
    return image


def _kind(field: Field, revealed: Set[Cell], hit: Cell | None, at: Cell) -> str:
    if at == hit:
        return "blast"
    if hit is not None and at in field.mines:
        return "mine"
    return str(field.numbers[at]) if at in revealed else "hidden"


def field_text(field: Field, revealed: Set[Cell], hit: Cell | None) -> str:
    """The field as text: a header of column letters, then per row its number and cells (``#`` hidden,
    ``.`` a revealed 0, digits, ``*`` a mine once one is hit, ``X`` the mine hit)."""
    marks = {"hidden": "#", "0": ".", "mine": "*", "blast": "X"}
    width = len(str(field.rows))
    lines = [" " * width + " " + " ".join(string.ascii_uppercase[: field.cols])]
    for r in range(field.rows):
        cells = [_kind(field, revealed, hit, r * field.cols + c) for c in range(field.cols)]
        lines.append(str(r + 1).rjust(width) + " " + " ".join(marks.get(k, k) for k in cells))
    return "\n".join(lines)
