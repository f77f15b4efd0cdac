"""SlidingPuzzle's views: the board as an image (numbered tiles, the gap dark) or as a text grid."""

from __future__ import annotations

import functools

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.sliding_puzzle.board import Board

GAP_PX = 4
FRAME, GAP, TILE, TILE_DONE, INK = (60, 52, 44), (34, 30, 26), (238, 214, 170), (176, 216, 160), (40, 32, 24)


@functools.lru_cache(maxsize=16)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


@functools.lru_cache(maxsize=64)
def _tile(number: int, size: int, home: bool) -> Image.Image:
    """One tile: its number centred, green when it stands where it belongs."""
    image = Image.new("RGB", (size, size), FRAME)
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((1, 1, size - 2, size - 2), radius=size // 8, fill=TILE_DONE if home else TILE)
    font = _font(max(10, size * 9 // 20))
    left, top, right, bottom = draw.textbbox((0, 0), str(number), font=font)
    x, y = (size - (right - left)) // 2 - left, (size - (bottom - top)) // 2 - top
    draw.text((x, y), str(number), font=font, fill=INK)
    return image


def board_image(board: Board, n: int, cell: int) -> Image.Image:
    """The tiles where they stand; a tile in its solved place is green."""
    side = n * cell + (n + 1) * GAP_PX
    image = Image.new("RGB", (side, side), FRAME)
    for position, tile in enumerate(board):
        r, c = divmod(position, n)
        x, y = GAP_PX + c * (cell + GAP_PX), GAP_PX + r * (cell + GAP_PX)
        if tile:
            image.paste(_tile(tile, cell, tile == position + 1), (x, y))
        else:
            image.paste(GAP, (x, y, x + cell, y + cell))
    return image


def board_text(board: Board, n: int) -> str:
    """Row by row, each tile's number, ``_`` for the gap."""
    width = len(str(n * n - 1))
    return "\n".join(
        " ".join((str(t) if t else "_").rjust(width) for t in board[r * n : r * n + n]) for r in range(n)
    )
