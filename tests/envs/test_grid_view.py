"""The grid views FogMaze and KeysDoors share: the square window around a block (padded past the edge) and
the ray caster (rays stop at solid blocks; what they cross is seen, what a wall hides is not)."""

from __future__ import annotations

import numpy as np

from vlm_envs.envs.grid_view import cast_rays, window

ROOM = """
#######
#.....#
#.....#
#..#..#
#.....#
#######
"""


def grid(text: str) -> np.ndarray:
    return np.array([[ch == "#" for ch in row] for row in text.strip().splitlines()])


def test_window_cuts_the_square_and_fills_outside():
    codes = np.arange(12).reshape(3, 4)
    assert window(codes, (1, 1), 1, fill=-1).tolist() == [[0, 1, 2], [4, 5, 6], [8, 9, 10]]
    assert window(codes, (0, 0), 1, fill=-1).tolist() == [[-1, -1, -1], [-1, 0, 1], [-1, 4, 5]]
    assert window(codes, (2, 3), 2, fill=-1)[2:, 2:].tolist() == [[11, -1, -1], [-1, -1, -1], [-1, -1, -1]]
    assert window(np.zeros((2, 2), dtype=bool), (0, 0), 1, fill=2).dtype == np.uint8


def test_rays_stop_at_walls_and_see_what_they_cross_but_not_behind_a_wall():
    solid = grid(ROOM)
    angles = 2 * np.pi * (np.arange(360) + 0.5) / 360
    hits = cast_rays(solid, 2.5, 3.5, np.sin(angles), np.cos(angles))  # from the middle of cell (2, 3)
    assert solid[hits.rows, hits.cols].all()
    assert hits.seen[2, 3] and hits.seen[1, 1] and hits.seen[3, 3]  # its cell, a far corner, the pillar
    assert not hits.seen[4, 3]  # straight behind the pillar
    east = cast_rays(solid, 2.5, 3.5, np.array([0.0]), np.array([1.0]))
    assert (east.rows[0], east.cols[0], east.side[0]) == (2, 6, 0) and east.distance[0] == 2.5
