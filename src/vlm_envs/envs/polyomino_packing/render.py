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


@functools.lru_cache(maxsize=256)
def _glyphs(text: str, size: int) -> Image.Image:
    """``text`` at ``size`` as a mask, cropped to its ink (drawn once, pasted wherever it appears)."""
    font = _font(size)
    left, top, right, bottom = font.getbbox(text)
    mask = Image.new("L", (max(1, right - left), max(1, bottom - top)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, font=font, fill=255)
    return mask


def _write(image: Image.Image, box: tuple[int, int, int, int], text: str, size: int, centred: bool) -> None:
    """``text`` in ink, centred in ``box`` or at its top left."""
    mask = _glyphs(text, size)
    x, y = box[0], box[1]
    if centred:
        x, y = (box[0] + box[2] - mask.width) // 2, (box[1] + box[3] - mask.height) // 2
    image.paste(INK, (x, y, x + mask.width, y + mask.height), mask)


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


class _Layout:
    """Where everything goes in the picture of one level at one cell size."""

    def __init__(self, rows: int, cols: int, pieces: Sequence[Shape], cell: int):
        self.cell = cell
        #: The margin of the row and column numbers.
        self.label = max(14, cell * 3 // 4)
        #: The side of a cell of a piece drawn beside the board, and the region outline's width.
        self.small, self.outline = max(10, cell * 3 // 4), max(3, cell // 12)
        self.slots = math.ceil(len(pieces) / math.ceil(len(pieces) / 3))
        named = _font(self.name_size).getlength("W (placed)")
        self.slot_w = max(max(size_of(p)[1] for p in pieces) * self.small, math.ceil(named)) + self.small
        self.slot_h = max(size_of(p)[0] for p in pieces) * self.small + self.label + self.small // 2
        self.board_w = self.label + cols * cell + self.outline
        height = max(
            self.label + rows * cell + self.outline, math.ceil(len(pieces) / self.slots) * self.slot_h
        )
        self.size = (self.board_w + cell // 2 + self.slots * self.slot_w, height + self.small // 2)

    @property
    def name_size(self) -> int:
        return self.label * 3 // 4

    def cell_box(self, r: int, c: int) -> tuple[int, int, int, int]:
        x, y = self.label + c * self.cell, self.label + r * self.cell
        return x, y, x + self.cell, y + self.cell

    def slot(self, piece: int) -> tuple[int, int]:
        """The top left of a piece's place beside the board."""
        return (
            self.board_w + self.cell // 2 + (piece % self.slots) * self.slot_w,
            self.small // 2 + (piece // self.slots) * self.slot_h,
        )


def _draw_piece(image: Image.Image, at: _Layout, piece: int, shape: Shape, placed: bool) -> None:
    """A piece beside the board under its letter (faded, and named placed, once it is on the board)."""
    x, y = at.slot(piece)
    draw = ImageDraw.Draw(image)
    draw.rectangle((x, y, x + at.slot_w - 1, y + at.slot_h - 1), fill=WHITE)
    _write(image, (x, y, x, y), letter(piece) + (" (placed)" if placed else ""), at.name_size, False)
    color = COLORS[piece] if not placed else tuple(round(255 + FADED * (v - 255)) for v in COLORS[piece])
    top = y + at.label
    for r, c in shape:
        box = (x + c * at.small, top + r * at.small, x + (c + 1) * at.small, top + (r + 1) * at.small)
        draw.rectangle(box, fill=color, outline=GRID)
    _edges(draw, set(shape), (x, top), at.small, 2)


@functools.lru_cache(maxsize=8)
def _empty(
    rows: int, cols: int, region: tuple[Cell, ...], pieces: tuple[Shape, ...], cell: int
) -> Image.Image:
    """The picture of a level before any piece is placed (each step's picture starts from a copy)."""
    at = _Layout(rows, cols, pieces, cell)
    image = Image.new("RGB", at.size, WHITE)
    draw = ImageDraw.Draw(image)
    inside = set(region)
    for r in range(rows):
        _write(
            image, (0, at.label + r * cell, at.label, at.label + (r + 1) * cell), str(r + 1), cell // 2, True
        )
    for c in range(cols):
        _write(
            image, (at.label + c * cell, 0, at.label + (c + 1) * cell, at.label), str(c + 1), cell // 2, True
        )
    for r in range(rows):
        for c in range(cols):
            draw.rectangle(at.cell_box(r, c), fill=FREE if (r, c) in inside else OUTSIDE, outline=GRID)
    _edges(draw, inside, (at.label, at.label), cell, at.outline)
    for p, shape in enumerate(pieces):
        _draw_piece(image, at, p, shape, placed=False)
    return image


def board_image(
    rows: int,
    cols: int,
    region: tuple[Cell, ...],
    pieces: tuple[Shape, ...],
    placed: Mapping[int, Sequence[Cell]],
    cell: int,
) -> Image.Image:
    """The board (rows numbered down the left, columns along the top) and, to its right, every piece as
    drawn under its letter (a placed one faded)."""
    at = _Layout(rows, cols, pieces, cell)
    image = _empty(rows, cols, region, pieces, cell).copy()
    draw = ImageDraw.Draw(image)
    for p, cells in placed.items():
        for r, c in cells:
            box = at.cell_box(r, c)
            draw.rectangle(box, fill=COLORS[p], outline=GRID)
            _write(image, box, letter(p), cell * 9 // 20, True)
        _edges(draw, set(cells), (at.label, at.label), cell, 2)
        _draw_piece(image, at, p, pieces[p], placed=True)
    _edges(draw, set(region), (at.label, at.label), cell, at.outline)
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
