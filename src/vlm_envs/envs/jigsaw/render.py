"""Jigsaw's views: the current arrangement as an image (tiles with their position numbers) or as a
grid of tile numbers."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.jigsaw.board import Board

GAP = 4
GAP_COLOR = (255, 255, 255)


def tiles_of(picture: Image.Image, n: int) -> list[Image.Image]:
    """The picture cut into n x n tiles, row-major."""
    side = picture.width // n
    return [
        picture.crop((c * side, r * side, (c + 1) * side, (r + 1) * side)) for r in range(n) for c in range(n)
    ]


def arrangement_image(tiles: list[Image.Image], board: Board, n: int, numbers: bool) -> Image.Image:
    """The tiles where ``board`` puts them, separated by thin gaps, each position numbered from 1."""
    side = tiles[0].width
    full = n * side + (n + 1) * GAP
    image = Image.new("RGB", (full, full), GAP_COLOR)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=max(12, side // 5))
    for position, tile in enumerate(board):
        r, c = divmod(position, n)
        x, y = GAP + c * (side + GAP), GAP + r * (side + GAP)
        image.paste(tiles[tile], (x, y))
        if numbers:
            label = str(position + 1)
            left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
            pad = 3
            draw.rectangle((x, y, x + right - left + 2 * pad, y + bottom - top + 2 * pad), fill=(0, 0, 0))
            draw.text((x + pad - left, y + pad - top), label, font=font, fill=(255, 255, 255))
    return image


def arrangement_text(board: Board, n: int) -> str:
    """Row by row, the number of the tile at each position (tile k belongs at position k)."""
    width = len(str(n * n))
    return "\n".join(" ".join(str(board[r * n + c] + 1).rjust(width) for c in range(n)) for r in range(n))
