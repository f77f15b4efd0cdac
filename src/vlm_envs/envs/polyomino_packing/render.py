"""PolyominoPacking's views: the board (the region outlined on a numbered grid, placed pieces in their
colours) beside the pieces as drawn, as an image; or the same as text."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.polyomino_packing.actions import letter
from vlm_envs.envs.polyomino_packing.shapes import Cell, Shape, neighbours, rows_of, size_of

WHITE, INK, GRID, OUTSIDE, FREE = (
    (255, 255, 255),
    (20, 20, 20),
    (170, 170, 170),
    (200, 200, 200),
    (250, 244, 226),
)
#: Each piece's colour, in letter order (none of them grey, the colour of cells outside the region).
COLORS = (
    (231, 76, 60),
    (52, 152, 219),
    (46, 204, 113),
    (241, 196, 15),
    (155, 89, 182),
    (230, 126, 34),
    (26, 188, 156),
    (236, 112, 170),
    (160, 170, 60),
    (110, 120, 220),
    (176, 122, 80),
    (120, 215, 235),
)
#: How much of a placed piece's colour its drawing beside the board keeps.
FADED = 0.3


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _centred(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], text: str, size: int) -> None:
    font = _font(size)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    x = (box[0] + box[2] - (right - left)) // 2 - left
    y = (box[1] + box[3] - (bottom - top)) // 2 - top
    draw.text((x, y), text, font=font, fill=INK)


def _edges(
    draw: ImageDraw.ImageDraw, cells: set[Cell], origin: tuple[int, int], cell: int, width: int
) -> None:
    """The outline of ``cells``: every side of one that no other of them shares."""
    x0, y0 = origin
    for r, c in cells:
        up, down, left, right = neighbours((r, c))
        left_x, top_y = x0 + c * cell, y0 + r * cell
        for other, line in (
            (up, (left_x, top_y, left_x + cell, top_y)),
            (down, (left_x, top_y + cell, left_x + cell, top_y + cell)),
            (left, (left_x, top_y, left_x, top_y + cell)),
            (right, (left_x + cell, top_y, left_x + cell, top_y + cell)),
        ):
            if other not in cells:
                draw.line(line, fill=INK, width=width)


def board_image(
    rows: int,
    cols: int,
    region: Sequence[Cell],
    pieces: Sequence[Shape],
    placed: Mapping[int, Sequence[Cell]],
    cell: int,
) -> Image.Image:
    """The board (rows numbered down the left, columns along the top) and, to its right, every piece as
    drawn under its letter (a placed one faded)."""
    label = max(14, cell * 3 // 4)
    small = max(10, cell * 3 // 4)
    lines = max(3, cell // 12)
    slots = math.ceil(len(pieces) / math.ceil(len(pieces) / 3))
    named = _font(label * 3 // 4).getlength("W (placed)")
    slot_w = max(max(size_of(p)[1] for p in pieces) * small, math.ceil(named)) + small
    slot_h = max(size_of(p)[0] for p in pieces) * small + label + small // 2
    shelf = math.ceil(len(pieces) / slots)
    board_w, board_h = label + cols * cell + lines, label + rows * cell + lines
    width = board_w + cell // 2 + slots * slot_w
    image = Image.new("RGB", (width, max(board_h, shelf * slot_h + small // 2)), WHITE)
    draw = ImageDraw.Draw(image)
    inside = set(region)
    owner = {c: p for p, cells in placed.items() for c in cells}
    for r in range(rows):
        _centred(draw, (0, label + r * cell, label, label + (r + 1) * cell), str(r + 1), cell // 2)
    for c in range(cols):
        _centred(draw, (label + c * cell, 0, label + (c + 1) * cell, label), str(c + 1), cell // 2)
    for r in range(rows):
        for c in range(cols):
            box = (label + c * cell, label + r * cell, label + (c + 1) * cell, label + (r + 1) * cell)
            piece = owner.get((r, c))
            fill = OUTSIDE if (r, c) not in inside else FREE if piece is None else COLORS[piece]
            draw.rectangle(box, fill=fill, outline=GRID)
            if piece is not None:
                _centred(draw, box, letter(piece), cell * 9 // 20)
    for cells in placed.values():
        _edges(draw, set(cells), (label, label), cell, 2)
    _edges(draw, inside, (label, label), cell, lines)
    for p, shape in enumerate(pieces):
        x = board_w + cell // 2 + (p % slots) * slot_w
        y = small // 2 + (p // slots) * slot_h
        name = letter(p) + (" (placed)" if p in placed else "")
        draw.text((x, y), name, font=_font(label * 3 // 4), fill=INK)
        color = COLORS[p] if p not in placed else tuple(round(255 + FADED * (v - 255)) for v in COLORS[p])
        for r, c in shape:
            box = (x + c * small, y + label + r * small, x + (c + 1) * small, y + label + (r + 1) * small)
            draw.rectangle(box, fill=color, outline=GRID)
        _edges(draw, set(shape), (x, y + label), small, 2)
    return image


def board_text(
    rows: int,
    cols: int,
    region: Sequence[Cell],
    pieces: Sequence[Shape],
    placed: Mapping[int, Sequence[Cell]],
) -> str:
    """The board row by row under column numbers (``.`` a free cell of the region, ``#`` a cell outside
    it, a letter a cell of that placed piece), then each piece as drawn (``#`` its cells)."""
    inside = set(region)
    owner = {c: p for p, cells in placed.items() for c in cells}
    pad = len(str(max(rows, cols)))
    lines = [
        f"Board: {rows} rows, {cols} columns ('.' a free cell of the region, '#' outside the region, "
        "a letter a cell of that placed piece).",
        " " * (pad + 1) + " ".join(str(c + 1).rjust(pad) for c in range(cols)),
    ]
    for r in range(rows):
        marks = [
            letter(owner[(r, c)]) if (r, c) in owner else "." if (r, c) in inside else "#"
            for c in range(cols)
        ]
        lines.append(str(r + 1).rjust(pad) + " " + " ".join(m.rjust(pad) for m in marks))
    lines.append("Pieces as drawn ('#' a cell of the piece):")
    for p, shape in enumerate(pieces):
        lines.append(letter(p) + (" (placed):" if p in placed else ":"))
        lines += rows_of(shape)
    return "\n".join(lines)
