"""Connect Four's views: the board as an image (a blue frame, red stones yours, yellow the engine's, each
player's latest stone ringed in white, the columns numbered on top) and as text (``X`` yours, ``O`` the
engine's, ``.`` empty, rows numbered from the bottom).

The empty frame and each stone are drawn once per size and pasted each turn.
"""

from __future__ import annotations

from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.connect_four.board import Geometry

BACKGROUND, FRAME, HOLE, LABEL = (250, 250, 247), (28, 78, 190), (236, 240, 248), (40, 40, 48)
YOURS, ENGINES, RING = (220, 45, 40), (245, 200, 35), (255, 255, 255)
#: Text marks: your stones, the engine's, empty cells.
MARKS = {"you": "X", "engine": "O", "empty": "."}


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _header(cell: int) -> int:
    return cell * 3 // 4


@lru_cache(maxsize=16)
def _frame(rows: int, cols: int, cell: int) -> Image.Image:
    """The empty board: the numbered columns and the frame with its holes."""
    margin, top = cell // 4, _header(cell)
    image = Image.new("RGB", (cols * cell + 2 * margin, top + rows * cell + margin), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle(
        (0, top - margin, image.width - 1, image.height - 1), radius=max(4, cell // 5), fill=FRAME
    )
    font = _font(max(10, cell * 2 // 5))
    pad = max(2, cell // 10)
    for c in range(cols):
        x = margin + c * cell
        draw.text((x + cell // 2, (top - margin) // 2), str(c + 1), fill=LABEL, font=font, anchor="mm")
        for r in range(rows):
            y = top + r * cell
            draw.ellipse((x + pad, y + pad, x + cell - pad - 1, y + cell - pad - 1), fill=HOLE)
    return image


@lru_cache(maxsize=32)
def _stone(cell: int, colour: tuple[int, int, int], latest: bool) -> Image.Image:
    """One cell of the frame holding a stone of ``colour`` (ringed when it is the ``latest``)."""
    tile = Image.new("RGB", (cell, cell), FRAME)
    draw = ImageDraw.Draw(tile)
    pad = max(2, cell // 10)
    draw.ellipse((pad, pad, cell - pad - 1, cell - pad - 1), fill=colour)
    if latest:
        inset, width = cell // 4, max(2, cell // 16)
        draw.ellipse((inset, inset, cell - inset - 1, cell - inset - 1), outline=RING, width=width)
    return tile


def board_image(g: Geometry, you: int, engine: int, cell: int, latest: tuple[int, ...] = ()) -> Image.Image:
    """The board: ``you`` and ``engine`` are the players' stones; the cells of ``latest`` are ringed."""
    image = _frame(g.rows, g.cols, cell).copy()
    margin, top = cell // 4, _header(cell)
    for c in range(g.cols):
        for r in range(g.rows):
            bit = 1 << (c * g.stride + r)
            if not (you | engine) & bit:
                continue
            colour = YOURS if you & bit else ENGINES
            tile = _stone(cell, colour, bit in latest)
            image.paste(tile, (margin + c * cell, top + (g.rows - 1 - r) * cell))
    return image


def board_text(g: Geometry, you: int, engine: int) -> str:
    """The board as text: the column numbers, then each row from the top, numbered from the bottom."""
    width = len(str(g.rows))
    lines = [" " * width + " " + " ".join(str(c + 1) for c in range(g.cols))]
    for r in range(g.rows - 1, -1, -1):
        marks = []
        for c in range(g.cols):
            bit = 1 << (c * g.stride + r)
            marks.append(MARKS["you"] if you & bit else MARKS["engine"] if engine & bit else MARKS["empty"])
        lines.append(f"{r + 1:>{width}} " + " ".join(marks))
    return "\n".join(lines)
