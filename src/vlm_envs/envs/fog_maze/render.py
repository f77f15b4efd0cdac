"""FogMaze's views: the k x k cells around the player (image or text) and a raycast corridor view.

Both views show only what the player can see now. The first-person view casts one ray per image
column through the block grid (:func:`vlm_envs.envs.grid_view.cast_rays`) and shades each column flat by
wall side and distance, so its bytes depend only on the maze, the cell and the heading.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from vlm_envs.envs.fog_maze.maze import DIRECTIONS, Cell
from vlm_envs.envs.grid_view import cast_rays, window

WALL, FLOOR, OUTSIDE = (60, 60, 72), (226, 220, 200), (20, 20, 24)
PLAYER, GOAL = (40, 90, 220), (40, 170, 70)
CEILING, GROUND, WALL_LIT, GOAL_LIT = (70, 80, 110), (120, 110, 95), (205, 190, 160), (60, 200, 90)
#: Width of a wall block relative to a cell in the local image.
WALL_RATIO = 4
#: Half-width of the camera plane: a field of view of 2*atan(0.66), about 66 degrees.
CAMERA_PLANE = 0.66


def _blocks(k: int) -> int:
    """Blocks from the player's block to the edge of the view ``k`` cells away."""
    return 2 * k + 1


def _goal_block(cell: Cell, goal: Cell, k: int) -> tuple[int, int] | None:
    """Where the goal stands in the view's block window, if it is in view."""
    b = _blocks(k)
    gr, gc = 2 * (goal[0] - cell[0]) + b, 2 * (goal[1] - cell[1]) + b
    return (gr, gc) if 0 <= gr <= 2 * b and 0 <= gc <= 2 * b else None


def _window(walls: np.ndarray, cell: Cell, k: int) -> np.ndarray:
    """Block codes of the cells at most ``k`` rows and columns from ``cell`` and the walls around
    them: 0 floor, 1 wall, 2 outside the maze."""
    return window(walls, (2 * cell[0] + 1, 2 * cell[1] + 1), _blocks(k), fill=2)


def local_text(walls: np.ndarray, cell: Cell, goal: Cell, k: int) -> str:
    """The cells at most ``k`` away from the player as text: ``#`` wall, ``.`` floor, ``@`` you, ``G`` goal,
    blank outside the maze."""
    codes = _window(walls, cell, k)
    chars = np.array([".", "#", " "])[codes]
    chars[_blocks(k), _blocks(k)] = "@"
    if (at := _goal_block(cell, goal, k)) is not None:
        chars[at] = "G"
    return "\n".join("".join(row).rstrip() for row in chars)


def local_image(walls: np.ndarray, cell: Cell, goal: Cell, k: int, cell_px: int) -> Image.Image:
    """The cells at most ``k`` away from the player: thin wall strips, you in blue, the goal green."""
    codes = _window(walls, cell, k)
    wall_px = max(2, cell_px // WALL_RATIO)
    sizes = np.where(np.arange(2 * _blocks(k) + 1) % 2 == 0, wall_px, cell_px)
    edges = np.concatenate([[0], np.cumsum(sizes)])
    palette = np.array([FLOOR, WALL, OUTSIDE], dtype=np.uint8)
    index = np.repeat(np.repeat(codes, sizes, axis=0), sizes, axis=1)
    image = Image.fromarray(palette[index], "RGB")
    draw = ImageDraw.Draw(image)
    pad = cell_px // 5

    def box(r: int, c: int) -> tuple[int, int, int, int]:
        return (
            int(edges[c]) + pad,
            int(edges[r]) + pad,
            int(edges[c + 1]) - pad - 1,
            int(edges[r + 1]) - pad - 1,
        )

    if (at := _goal_block(cell, goal, k)) is not None:
        draw.rectangle(box(*at), fill=GOAL)
    draw.ellipse(box(_blocks(k), _blocks(k)), fill=PLAYER)
    return image


def _cast(walls: np.ndarray, goal: Cell, cell: Cell, heading: int, columns: int) -> tuple[np.ndarray, ...]:
    """Per column: perpendicular distance, side (0: x-side), goal hit, hit block; and the seen blocks."""
    dy, dx = DIRECTIONS[heading]
    ply, plx = dx * CAMERA_PLANE, -dy * CAMERA_PLANE  # the player's right hand, scaled
    cam = 2.0 * (np.arange(columns) + 0.5) / columns - 1.0
    solid = walls.copy()
    solid[2 * goal[0] + 1, 2 * goal[1] + 1] = True
    hits = cast_rays(solid, 2 * cell[0] + 1.5, 2 * cell[1] + 1.5, dy + ply * cam, dx + plx * cam)
    is_goal = (hits.rows == 2 * goal[0] + 1) & (hits.cols == 2 * goal[1] + 1)
    return hits.distance, hits.side, is_goal, hits.rows * walls.shape[1] + hits.cols, hits.seen


def first_person(
    walls: np.ndarray, cell: Cell, heading: int, goal: Cell, width: int, height: int
) -> tuple[Image.Image, set[Cell]]:
    """The corridor view from ``cell`` facing ``heading`` (the goal is a green block), and the cells
    the rays crossed."""
    dist, side, is_goal, block, seen = _cast(walls, goal, cell, heading, width)
    dist = np.maximum(dist, 1e-3)
    line = height / dist
    top = np.floor((height - line) / 2).astype(np.int64)
    bottom = np.ceil((height + line) / 2).astype(np.int64)
    shade = np.where(side == 0, 1.0, 0.72) / (1.0 + 0.12 * dist)
    base = np.where(is_goal[:, None], np.array(GOAL_LIT, float), np.array(WALL_LIT, float))
    colors = np.clip(base * shade[:, None], 0, 255).astype(np.uint8)
    edge = np.zeros(width, dtype=bool)
    edge[1:] = (block[1:] != block[:-1]) | (side[1:] != side[:-1])
    colors[edge] = colors[edge] // 2
    rows = np.arange(height, dtype=np.int64)[:, None]
    background = np.where(rows < height // 2, 0, 1)[:, :, None]  # (height, 1, 1): ceiling or ground
    background = np.where(background == 0, np.array(CEILING, np.uint8), np.array(GROUND, np.uint8))
    wall_mask = (rows >= top[None, :]) & (rows < bottom[None, :])
    image = np.where(wall_mask[:, :, None], colors[None, :, :], background)
    cells = {(int(r), int(c)) for r, c in zip(*np.nonzero(seen[1::2, 1::2]), strict=True)}
    return Image.fromarray(image, "RGB"), cells
