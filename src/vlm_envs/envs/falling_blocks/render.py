"""Falling blocks' views: the well as an image (filled cells grey, row numbers at the left from 1 at the
bottom, column numbers under it, and a panel with the current piece in its four rotations and the next
pieces) and as text (``#`` filled, ``.`` empty, with the same numbers)."""

from __future__ import annotations

from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.falling_blocks.pieces import ROTATIONS, shape
from vlm_envs.envs.falling_blocks.well import Board

BACKGROUND, LABEL, WELL, GRID, WALL = (
    (30, 32, 40),
    (210, 210, 220),
    (18, 20, 26),
    (44, 48, 60),
    (120, 124, 140),
)
FILLED, FILLED_EDGE = (156, 162, 178), (96, 100, 116)
#: Each piece's colour in the panel (the usual ones: I cyan, O yellow, T purple, S green, Z red, J blue,
#: L orange).
PIECE_COLORS = {
    "I": (60, 200, 230),
    "O": (236, 200, 50),
    "T": (170, 90, 210),
    "S": (90, 200, 90),
    "Z": (230, 80, 80),
    "J": (70, 110, 230),
    "L": (240, 150, 50),
}


@lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


class Layout:
    """Where everything goes in the image of a well ``width`` x ``height`` at ``cell`` pixels a cell."""

    def __init__(self, width: int, height: int, cell: int, preview: int):
        self.width, self.height, self.cell, self.preview = width, height, cell, preview
        self.mini = max(6, cell // 2)  # a cell of the panel's pieces
        self.box = 5 * self.mini  # a panel piece's square
        self.left, self.top = cell, cell // 2
        self.panel = self.left + width * cell + cell // 2
        self.label = max(10, cell * 3 // 7)
        self.rotations_top = self.top + self.label + cell // 4
        self.next_top = self.rotations_top + 2 * (self.box + self.label + cell // 4) + cell // 4
        rows_of_next = (preview + 1) // 2
        panel_bottom = self.next_top + (self.label + cell // 4 + rows_of_next * (self.box + cell // 4))
        self.size = (
            self.panel + 2 * self.box + self.mini + cell // 2,
            max(self.top + height * cell + cell, panel_bottom if preview else self.next_top),
        )

    def slot(self, i: int, top: int, labelled: bool) -> tuple[int, int]:
        """The top left corner of the ``i``-th piece square of a panel section starting at ``top``."""
        row, col = divmod(i, 2)
        step = self.box + (self.label if labelled else 0) + self.cell // 4
        return self.panel + col * (self.box + self.mini), top + row * step


@lru_cache(maxsize=16)
def _frame(width: int, height: int, cell: int, preview: int) -> Image.Image:
    """The empty well with its numbers and the panel's labels (drawn once per size)."""
    at = Layout(width, height, cell, preview)
    image = Image.new("RGB", at.size, BACKGROUND)
    draw = ImageDraw.Draw(image)
    x1, y1 = at.left + width * cell, at.top + height * cell
    draw.rectangle((at.left, at.top, x1 - 1, y1 - 1), fill=WELL)
    for c in range(1, width):
        draw.line((at.left + c * cell, at.top, at.left + c * cell, y1 - 1), fill=GRID)
    for r in range(1, height):
        draw.line((at.left, at.top + r * cell, x1 - 1, at.top + r * cell), fill=GRID)
    draw.line((at.left - 1, at.top, at.left - 1, y1, x1, y1, x1, at.top), fill=WALL, width=2)
    font = _font(max(9, cell * 2 // 5))
    for c in range(width):
        draw.text(
            (at.left + c * cell + cell // 2, y1 + cell // 2), str(c + 1), fill=LABEL, font=font, anchor="mm"
        )
    for r in range(height):
        draw.text((at.left // 2, y1 - r * cell - cell // 2), str(r + 1), fill=LABEL, font=font, anchor="mm")
    small = _font(at.label)
    for rotation in range(ROTATIONS):
        x, y = at.slot(rotation, at.rotations_top, True)
        draw.text(
            (x + at.box // 2, y + at.box + at.label // 2),
            f"rotate {rotation}",
            fill=LABEL,
            font=small,
            anchor="mm",
        )
    if preview:
        draw.text((at.panel, at.next_top), "Next:", fill=LABEL, font=small, anchor="lt")
    return image


def _piece(draw: ImageDraw.ImageDraw, piece: str, rotation: int, x: int, y: int, at: Layout) -> None:
    """``piece`` at ``rotation`` drawn centred in the panel square at (``x``, ``y``)."""
    turned = shape(piece, rotation)
    m = at.mini
    draw.rectangle((x, y, x + at.box - 1, y + at.box - 1), fill=WELL)
    x0 = x + (at.box - turned.width * m) // 2
    y0 = y + (at.box - turned.height * m) // 2
    for r, line in enumerate(turned.picture):
        for c, ch in enumerate(line):
            if ch == "#":
                cx, cy = x0 + c * m, y0 + r * m
                draw.rectangle((cx, cy, cx + m - 2, cy + m - 2), fill=PIECE_COLORS[piece])


def well_image(board: Board, coming: str, width: int, height: int, cell: int, preview: int) -> Image.Image:
    """The well holding ``board``, the first of the pieces ``coming`` in its four rotations, and the next
    ``preview`` of them."""
    at = Layout(width, height, cell, preview)
    image = _frame(width, height, cell, preview).copy()
    draw = ImageDraw.Draw(image)
    bottom = at.top + height * cell
    for r, row in enumerate(board):
        for c in range(width):
            if row >> c & 1:
                x, y = at.left + c * cell, bottom - (r + 1) * cell
                draw.rectangle((x + 1, y + 1, x + cell - 1, y + cell - 1), fill=FILLED_EDGE)
                draw.rectangle((x + 3, y + 3, x + cell - 3, y + cell - 3), fill=FILLED)
    if coming:
        draw.text((at.panel, at.top), f"Now: {coming[0]}", fill=LABEL, font=_font(at.label), anchor="lt")
        for rotation in range(ROTATIONS):
            _piece(draw, coming[0], rotation, *at.slot(rotation, at.rotations_top, True), at)
        for i, piece in enumerate(coming[1 : 1 + preview]):
            _piece(draw, piece, 0, *at.slot(i, at.next_top + at.label + at.cell // 4, False), at)
    return image


def well_text(board: Board, width: int, height: int) -> str:
    """The well as text: a header of column numbers, then each row (the top first) with its number."""
    lines = ["   " + "".join(f"{c + 1:>3}" for c in range(width))]
    for r in range(height - 1, -1, -1):
        row = board[r] if r < len(board) else 0
        lines.append(f"{r + 1:>3}" + "".join("  #" if row >> c & 1 else "  ." for c in range(width)))
    return "\n".join(lines)


def pieces_text(coming: str, preview: int) -> str:
    """The current piece in its four rotations side by side, then the next ``preview`` pieces by name."""
    if not coming:
        return "No pieces are left."
    pictures = [shape(coming[0], rotation).picture for rotation in range(ROTATIONS)]
    lines = [f"Now: {coming[0]}", "".join(f"rotate {r}".ljust(10) for r in range(ROTATIONS)).rstrip()]
    for i in range(max(len(p) for p in pictures)):
        lines.append("".join((p[i] if i < len(p) else "").ljust(10) for p in pictures).rstrip())
    if preview:
        lines.append("Next: " + (", ".join(coming[1 : 1 + preview]) or "none"))
    return "\n".join(lines)
