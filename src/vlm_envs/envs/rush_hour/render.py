"""Rush Hour's views: the board as an image (lettered vehicles, the red car X, the exit a gap in the right
wall) or as a text grid."""

from __future__ import annotations

import functools

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.rush_hour.board import NAMES, Layout, Position, exit_row, grid

WALL, FLOOR, LINE, RED, INK = (70, 70, 78), (214, 210, 200), (190, 186, 176), (214, 40, 40), (20, 20, 20)
#: Colours of the other vehicles, in letter order (none of them red).
COLORS = (
    (70, 130, 220),
    (80, 170, 90),
    (240, 190, 50),
    (150, 90, 200),
    (240, 140, 60),
    (60, 180, 180),
    (200, 110, 160),
    (130, 150, 60),
    (120, 120, 220),
    (170, 120, 80),
    (90, 200, 140),
    (220, 200, 120),
)


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def board_image(layout: Layout, position: Position, cell: int) -> Image.Image:
    """The board: a wall around it with the exit open at the right of the red car's row."""
    n, wall = layout.n, max(4, cell // 6)
    side = n * cell + 2 * wall
    image = Image.new("RGB", (side, side), WALL)
    draw = ImageDraw.Draw(image)
    draw.rectangle((wall, wall, wall + n * cell - 1, wall + n * cell - 1), fill=FLOOR)
    for i in range(1, n):
        draw.line((wall + i * cell, wall, wall + i * cell, wall + n * cell - 1), fill=LINE)
        draw.line((wall, wall + i * cell, wall + n * cell - 1, wall + i * cell), fill=LINE)
    row = exit_row(n)
    draw.rectangle((wall + n * cell, wall + row * cell, side - 1, wall + (row + 1) * cell - 1), fill=FLOOR)
    font, pad = _font(max(10, cell // 2)), max(3, cell // 10)
    for v, at in enumerate(position):
        (r0, c0), (r1, c1) = layout.cells(v, at)[0], layout.cells(v, at)[-1]
        box = (
            wall + c0 * cell + pad,
            wall + r0 * cell + pad,
            wall + (c1 + 1) * cell - pad,
            wall + (r1 + 1) * cell - pad,
        )
        draw.rounded_rectangle(box, radius=cell // 5, fill=RED if v == 0 else COLORS[(v - 1) % len(COLORS)])
        left, top, right, bottom = draw.textbbox((0, 0), NAMES[v], font=font)
        x = (box[0] + box[2] - (right - left)) // 2 - left
        y = (box[1] + box[3] - (bottom - top)) // 2 - top
        draw.text((x, y), NAMES[v], font=font, fill=INK if v else (255, 255, 255))
    return image


def board_text(layout: Layout, position: Position) -> str:
    """Row by row, each cell's vehicle letter or ``.``; ``>`` marks the exit at the right of its row."""
    rows = grid(layout, position)
    lines = [" ".join(r) for r in rows]
    lines[exit_row(layout.n)] += " >"
    return "\n".join(lines)
