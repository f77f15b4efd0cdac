"""KeysDoors' views: the level as an image and as text, whole (``full``) or the cells around the player
(``local``), where walls and locked doors hide what lies behind them.

What the player sees in ``local`` is what rays from the middle of its cell reach before a wall or a locked
door stops them (:func:`vlm_envs.envs.grid_view.cast_rays`, :data:`SIGHT_RAYS` of them all around), within
the ``view_size`` square. The image of the level's still parts (floor, walls, lava, the goal) is drawn once
per episode (:func:`still_image`); each turn copies it (or cuts the square around the player from it) and
draws the doors, the keys on the floor and the player.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vlm_envs.envs.grid_view import cast_rays, window
from vlm_envs.envs.keys_doors.world import LAVA, LETTERS, WALL, Cell, Level, State

FLOOR_RGB, WALL_RGB, OUTSIDE_RGB, FOG_RGB = (226, 220, 200), (84, 84, 96), (20, 20, 24), (170, 178, 192)
LAVA_RGB, WAVE_RGB, GOAL_RGB = (232, 96, 24), (255, 196, 64), (40, 170, 70)
PLAYER_RGB, PLAYER_RING = (24, 24, 28), (255, 255, 255)
#: The RGB of each of world.COLOURS.
COLOUR_RGB = ((210, 40, 40), (40, 90, 220), (230, 186, 16), (140, 60, 190), (20, 176, 200))
#: Text symbols: cells by code (floor, wall, lava, goal, and a door, whose symbol is then its colour's letter
#: or the open door's), the player, an open door, a cell out of sight, a cell outside the level.
SYMBOLS = (".", "#", "~", "G", "+")
PLAYER, OPEN_DOOR, UNSEEN, OUTSIDE = "@", "/", "?", " "
#: Rays cast around the player for ``local`` sight: about 1.5 degrees apart, so each cell of a 9x9 view
#: is crossed by several where nothing hides it.
SIGHT_RAYS = 240
_ANGLES = 2.0 * np.pi * (np.arange(SIGHT_RAYS) + 0.5) / SIGHT_RAYS


def visible(level: Level, state: State, radius: int) -> np.ndarray:
    """Per cell of the level: whether the player sees it, at most ``radius`` rows and columns away."""
    grid = level.array
    solid = grid == WALL
    for i, door in enumerate(level.doors):
        solid[door.cell] = not state.opened >> i & 1
    (row, col) = state.cell
    seen = cast_rays(solid, row + 0.5, col + 0.5, np.sin(_ANGLES), np.cos(_ANGLES)).seen
    near = np.zeros_like(seen)
    near[max(row - radius, 0) : row + radius + 1, max(col - radius, 0) : col + radius + 1] = True
    return seen & near


def _symbols(level: Level, state: State) -> np.ndarray:
    """The level as one symbol per cell: doors, the keys on the floor and the player included."""
    chars = np.array(SYMBOLS)[level.array]
    for i, door in enumerate(level.doors):
        chars[door.cell] = OPEN_DOOR if state.opened >> i & 1 else LETTERS[door.colour]
    for i, key in enumerate(level.keys):
        if not state.held >> i & 1:
            chars[key.cell] = LETTERS[key.colour].lower()
    chars[state.cell] = PLAYER
    return chars


def level_text(level: Level, state: State) -> str:
    """The whole level as rows of symbols (``@`` the player)."""
    return "\n".join("".join(row) for row in _symbols(level, state))


def _around(level: Level, cell: Cell, radius: int) -> np.ndarray:
    """Flat indices of the level's cells in the square around ``cell``; -1 outside the level."""
    rows, cols = level.shape
    return window(np.arange(rows * cols).reshape(rows, cols), cell, radius, fill=-1)


def local_text(level: Level, state: State, radius: int, seen: np.ndarray) -> str:
    """The square around the player as symbols: ``?`` where it cannot see, blank outside the level."""
    index = _around(level, state.cell, radius)
    flat, seen_flat = _symbols(level, state).ravel(), seen.ravel()
    chars = np.where(index < 0, OUTSIDE, np.where(seen_flat[index], flat[index], UNSEEN))
    return "\n".join("".join(row).rstrip() for row in chars)


def still_image(level: Level, cell_px: int, margin: int) -> Image.Image:
    """The level's floor, walls, lava and goal (doors as floor), ``margin`` cells of black around it."""
    rows, cols = level.shape
    palette = np.array([FLOOR_RGB, WALL_RGB, LAVA_RGB, GOAL_RGB, FLOOR_RGB], dtype=np.uint8)
    grid = np.full((rows + 2 * margin, cols + 2 * margin, 3), OUTSIDE_RGB, dtype=np.uint8)
    grid[margin : margin + rows, margin : margin + cols] = palette[level.array]
    image = Image.fromarray(grid, "RGB").resize(
        (grid.shape[1] * cell_px, grid.shape[0] * cell_px), Image.NEAREST
    )
    draw = ImageDraw.Draw(image)
    line = max(1, cell_px // 16)
    for r, c in zip(*np.nonzero(level.array == LAVA), strict=True):
        x0, y0 = (c + margin) * cell_px, (r + margin) * cell_px
        for k in (1, 2, 3):  # three wavy lines
            y = y0 + k * cell_px // 4
            points = [(x0 + i * cell_px // 4, y + (-1) ** i * max(1, cell_px // 16)) for i in range(5)]
            draw.line(points, fill=WAVE_RGB, width=line)
    gr, gc = level.goal
    pad = cell_px // 6
    x0, y0 = (gc + margin) * cell_px, (gr + margin) * cell_px
    draw.rectangle((x0 + pad, y0 + pad, x0 + cell_px - pad - 1, y0 + cell_px - pad - 1), outline=FLOOR_RGB)
    return image


def board_image(
    still: Image.Image,
    level: Level,
    state: State,
    cell_px: int,
    sight: tuple[int, np.ndarray] | None = None,
) -> Image.Image:
    """The level now: the whole of it (``sight`` None), or the square of ``sight = (radius, seen)`` around
    the player, fogged where it cannot see (``still`` then has ``radius`` cells of margin)."""
    if sight is None:
        image, origin = still.copy(), (0, 0)
    else:
        radius = sight[0]
        top, left = state.cell[0] * cell_px, state.cell[1] * cell_px
        side = (2 * radius + 1) * cell_px
        image, origin = (
            still.crop((left, top, left + side, top + side)),
            (state.cell[0] - radius, state.cell[1] - radius),
        )
    draw = ImageDraw.Draw(image)

    def box(cell: Cell) -> tuple[int, int] | None:
        r, c = cell[0] - origin[0], cell[1] - origin[1]
        if sight is not None and not (0 <= r <= 2 * sight[0] and 0 <= c <= 2 * sight[0]):
            return None
        return c * cell_px, r * cell_px

    for i, door in enumerate(level.doors):
        if (at := box(door.cell)) is not None:
            _door(draw, at, cell_px, COLOUR_RGB[door.colour], bool(state.opened >> i & 1))
    for i, key in enumerate(level.keys):
        if not state.held >> i & 1 and (at := box(key.cell)) is not None:
            _key(draw, at, cell_px, COLOUR_RGB[key.colour])
    at = box(state.cell)
    assert at is not None  # the player is always in its own view
    pad = cell_px // 5
    draw.ellipse(
        (at[0] + pad, at[1] + pad, at[0] + cell_px - pad - 1, at[1] + cell_px - pad - 1),
        fill=PLAYER_RGB,
        outline=PLAYER_RING,
        width=max(1, cell_px // 16),
    )
    if sight is not None:
        radius, seen = sight
        index = _around(level, state.cell, radius)
        hidden = (index >= 0) & ~seen.ravel()[index]
        for r, c in zip(*np.nonzero(hidden), strict=True):
            draw.rectangle(
                (c * cell_px, r * cell_px, (c + 1) * cell_px - 1, (r + 1) * cell_px - 1), fill=FOG_RGB
            )
    return image


def _door(
    draw: ImageDraw.ImageDraw, at: tuple[int, int], px: int, rgb: tuple[int, ...], opened: bool
) -> None:
    """A locked door: a block of its colour with a keyhole; an open one: its colour's frame only."""
    x0, y0, x1, y1 = at[0], at[1], at[0] + px - 1, at[1] + px - 1
    if opened:
        draw.rectangle((x0, y0, x1, y1), outline=rgb, width=max(2, px // 8))
        return
    draw.rectangle((x0, y0, x1, y1), fill=rgb, outline=OUTSIDE_RGB, width=max(1, px // 16))
    cx, cy, r = x0 + px // 2, y0 + px * 2 // 5, max(1, px // 10)
    draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=OUTSIDE_RGB)
    draw.rectangle((cx - max(1, r // 2), cy, cx + max(1, r // 2), y0 + px * 7 // 10), fill=OUTSIDE_RGB)


def _key(draw: ImageDraw.ImageDraw, at: tuple[int, int], px: int, rgb: tuple[int, ...]) -> None:
    """A key lying on the floor: a ring, a shaft and two teeth, in its colour."""
    x0, y0 = at
    width = max(2, px // 10)
    ring = px // 6
    cx, cy = x0 + px // 4 + ring // 2, y0 + px // 2
    draw.ellipse((cx - ring, cy - ring, cx + ring, cy + ring), outline=rgb, width=width)
    end = x0 + px * 7 // 8
    draw.line((cx + ring, cy, end, cy), fill=rgb, width=width)
    for tooth in (end - width, end - 3 * width):
        draw.line((tooth, cy, tooth, cy + px // 6), fill=rgb, width=width)
