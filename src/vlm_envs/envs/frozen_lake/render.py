"""FrozenLake's views: the lake as an image (ice, holes, the goal's flag, the player) and as text.

The text uses VAGEN's symbols: ``P`` player, ``_`` frozen, ``O`` hole, ``G`` goal, ``X`` the player in a
hole, ``√`` the player on the goal. The image of the lake without the player is drawn once per episode
(:func:`lake_image`); each turn pastes the player on a copy (:func:`with_player`).
"""

from __future__ import annotations

from PIL import Image, ImageDraw

from vlm_envs.envs.frozen_lake.lake import Cell, Lake

ICE, ICE_EDGE = (214, 236, 248), (168, 204, 228)
HOLE, HOLE_RIM = (22, 44, 84), (120, 160, 200)
POLE, FLAG = (90, 62, 40), (230, 60, 50)
PLAYER, PLAYER_DARK = (250, 170, 30), (120, 70, 10)


def lake_image(lake: Lake, cell_px: int) -> Image.Image:
    """The lake without the player: ice tiles, dark holes, a red flag on the goal."""
    side = lake.size * cell_px
    image = Image.new("RGB", (side, side), ICE)
    draw = ImageDraw.Draw(image)
    pad = max(2, cell_px // 8)
    for r, row in enumerate(lake.rows):
        for c, letter in enumerate(row):
            x0, y0 = c * cell_px, r * cell_px
            draw.rectangle(
                (x0, y0, x0 + cell_px - 1, y0 + cell_px - 1), outline=ICE_EDGE, width=max(1, cell_px // 32)
            )
            if letter == "H":
                draw.ellipse(
                    (x0 + pad, y0 + pad, x0 + cell_px - pad - 1, y0 + cell_px - pad - 1), fill=HOLE_RIM
                )
                inner = pad + max(2, cell_px // 16)
                draw.ellipse(
                    (x0 + inner, y0 + inner, x0 + cell_px - inner - 1, y0 + cell_px - inner - 1), fill=HOLE
                )
            elif letter == "G":
                pole_x = x0 + cell_px * 3 // 8
                draw.line(
                    (pole_x, y0 + pad, pole_x, y0 + cell_px - pad), fill=POLE, width=max(2, cell_px // 16)
                )
                draw.polygon(
                    [
                        (pole_x, y0 + pad),
                        (x0 + cell_px - pad, y0 + cell_px * 5 // 16),
                        (pole_x, y0 + cell_px // 2),
                    ],
                    fill=FLAG,
                )
    return image


def with_player(lake_picture: Image.Image, cell: Cell, cell_px: int) -> Image.Image:
    """A copy of the lake's picture with the player (an orange figure) on ``cell``."""
    image = lake_picture.copy()
    draw = ImageDraw.Draw(image)
    x0, y0 = cell[1] * cell_px, cell[0] * cell_px
    head = cell_px // 7
    cx = x0 + cell_px // 2
    outline = max(1, cell_px // 32)
    draw.ellipse(
        (cx - head, y0 + cell_px // 6, cx + head, y0 + cell_px // 6 + 2 * head),
        fill=PLAYER,
        outline=PLAYER_DARK,
        width=outline,
    )
    body_top = y0 + cell_px // 6 + 2 * head + 1
    draw.rounded_rectangle(
        (cx - cell_px // 5, body_top, cx + cell_px // 5, y0 + cell_px * 13 // 16),
        radius=max(1, cell_px // 10),
        fill=PLAYER,
        outline=PLAYER_DARK,
        width=outline,
    )
    return image


def lake_text(lake: Lake, cell: Cell) -> str:
    """The lake as rows of symbols, the player's tile included."""
    symbols = {"S": "_", "F": "_", "H": "O", "G": "G"}
    lines = []
    for r, row in enumerate(lake.rows):
        marks = [symbols[letter] for letter in row]
        if r == cell[0]:
            marks[cell[1]] = {"H": "X", "G": "√"}.get(row[cell[1]], "P")
        lines.append(" ".join(marks))
    return "\n".join(lines)
