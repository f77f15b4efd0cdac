"""What a player sees of a grid from where it stands, shared by the grid envs' views (FogMaze, KeysDoors).

A grid is a 2-D array of block codes. :func:`window` cuts the square of blocks around one block (blocks
past the edge get a fill code); :func:`cast_rays` walks rays from a point through the grid, one block at
a time (the DDA of a Wolfenstein-style raycaster), until each meets a solid block, and says where each
stopped and which blocks the rays crossed. Both depend only on their inputs, so views built on them are
byte-exact for a seed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

Block = tuple[int, int]


def window(grid: np.ndarray, centre: Block, radius: int, fill: int) -> np.ndarray:
    """The ``(2 * radius + 1)``-square of ``grid`` centred on block ``centre``; blocks outside the grid are
    ``fill``."""
    size = 2 * radius + 1
    top, left = centre[0] - radius, centre[1] - radius
    out = np.full((size, size), fill, dtype=np.result_type(grid.dtype, np.min_scalar_type(fill)))
    r0, c0 = max(top, 0), max(left, 0)
    r1, c1 = min(top + size, grid.shape[0]), min(left + size, grid.shape[1])
    if r1 > r0 and c1 > c0:
        out[r0 - top : r1 - top, c0 - left : c1 - left] = grid[r0:r1, c0:c1]
    return out


@dataclasses.dataclass(frozen=True)
class RayHits:
    """Where each ray stopped, and the blocks the rays crossed."""

    #: Per ray: how far it went, in lengths of its direction vector, to the side of the block it stopped
    #: in (for a camera's rays, the distance perpendicular to the camera plane).
    distance: np.ndarray
    #: Per ray: 0 where it entered its last block across a column line (moving along x), 1 across a row line.
    side: np.ndarray
    #: Per ray: the row and column of the block it stopped in.
    rows: np.ndarray
    cols: np.ndarray
    #: Per block of the grid: whether a ray crossed it (the start block and the blocks hit included).
    seen: np.ndarray


def cast_rays(solid: np.ndarray, y: float, x: float, dy: np.ndarray, dx: np.ndarray) -> RayHits:
    """Rays from the point (``y``, ``x``) (block ``(r, c)`` spans ``[r, r + 1) x [c, c + 1)``) along each
    direction (``dy[i]``, ``dx[i]``) until each enters a block where ``solid`` is true. Every ray must meet
    one: the grid's border blocks are solid."""
    ddx = np.divide(1.0, np.abs(dx), out=np.full(dx.shape, np.inf), where=dx != 0)
    ddy = np.divide(1.0, np.abs(dy), out=np.full(dy.shape, np.inf), where=dy != 0)
    mapx, mapy = np.full(dx.shape, int(x)), np.full(dy.shape, int(y))
    stepx, stepy = np.where(dx < 0, -1, 1), np.where(dy < 0, -1, 1)
    sidex = np.where(dx < 0, x - mapx, mapx + 1.0 - x) * ddx
    sidey = np.where(dy < 0, y - mapy, mapy + 1.0 - y) * ddy
    seen = np.zeros(solid.shape, dtype=bool)
    seen[int(y), int(x)] = True
    hit = np.zeros(dx.shape, dtype=bool)
    side = np.zeros(dx.shape, dtype=np.int8)
    while not hit.all():
        active = ~hit
        along_x = active & (sidex < sidey)
        along_y = active & ~along_x
        sidex = np.where(along_x, sidex + ddx, sidex)
        mapx = np.where(along_x, mapx + stepx, mapx)
        sidey = np.where(along_y, sidey + ddy, sidey)
        mapy = np.where(along_y, mapy + stepy, mapy)
        side = np.where(along_x, 0, np.where(along_y, 1, side)).astype(np.int8)
        seen[mapy[active], mapx[active]] = True
        hit |= solid[mapy, mapx]
    with np.errstate(invalid="ignore"):  # inf - inf on the side a ray never stepped along (not chosen)
        distance = np.where(side == 0, sidex - ddx, sidey - ddy)
    return RayHits(distance, side, mapy, mapx, seen)
