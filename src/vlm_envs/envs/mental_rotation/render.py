"""MentalRotation's renderer: shaded unit cubes from a fixed viewpoint by the painter's algorithm.

Orthographic camera and light are fixed; cubes are drawn far to near, each with its faces that turn
toward the camera and touch no other cube. The picture depends only on the cube set (up to
translation): it is centred on the centroid and scaled by the rotation-free radius.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

#: Camera: 30 degrees about y, then 25 about x (camera coordinates: x right, y up, z toward the viewer).
_YAW, _PITCH = np.radians(30.0), np.radians(25.0)
CAMERA = np.array(
    [[1, 0, 0], [0, np.cos(_PITCH), -np.sin(_PITCH)], [0, np.sin(_PITCH), np.cos(_PITCH)]]
) @ np.array([[np.cos(_YAW), 0, np.sin(_YAW)], [0, 1, 0], [-np.sin(_YAW), 0, np.cos(_YAW)]])
#: Light direction in world coordinates (fixed), normalised.
LIGHT = np.array([0.4, 0.8, 0.6]) / np.linalg.norm([0.4, 0.8, 0.6])
BASE_COLOR = np.array([80.0, 140.0, 215.0])
BACKGROUND = (245, 245, 240)
OUTLINE = (25, 25, 35)
#: The axis marker in the corner of every view: x red, y green, z blue.
AXIS_COLORS = ((200, 40, 40), (30, 150, 50), (40, 60, 200))
#: Each face: outward normal and its four corners (offsets from the cube's minimum corner).
_FACES = tuple(
    (np.array(n), np.array(corners, dtype=float))
    for n, corners in (
        ((1, 0, 0), [(1, 0, 0), (1, 1, 0), (1, 1, 1), (1, 0, 1)]),
        ((-1, 0, 0), [(0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 1, 0)]),
        ((0, 1, 0), [(0, 1, 0), (0, 1, 1), (1, 1, 1), (1, 1, 0)]),
        ((0, -1, 0), [(0, 0, 0), (1, 0, 0), (1, 0, 1), (0, 0, 1)]),
        ((0, 0, 1), [(0, 0, 1), (1, 0, 1), (1, 1, 1), (0, 1, 1)]),
        ((0, 0, -1), [(0, 0, 0), (0, 1, 0), (1, 1, 0), (1, 0, 0)]),
    )
)


def render(cubes: np.ndarray, size: int, radius: float) -> Image.Image:
    """The cube set drawn on a ``size`` square; ``radius`` (the shape's, rotation-free) sets the scale."""
    cubes = cubes - cubes.min(axis=0)
    centre = cubes.mean(axis=0) + 0.5
    scale = 0.46 * size / radius
    taken = {tuple(int(v) for v in c) for c in cubes}
    depth = ((cubes + 0.5 - centre) @ CAMERA.T)[:, 2]
    image = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(image)
    visible = [(n, corners) for n, corners in _FACES if (CAMERA @ n)[2] > 0]
    normals = np.array([n for n, _ in visible])
    shades = 0.35 + 0.65 * np.maximum(0.0, normals @ LIGHT)
    colors = [tuple(int(v) for v in np.clip(BASE_COLOR * shade, 0, 255)) for shade in shades]
    corners = np.array([c for _, c in visible])  # (faces, 4, 3)
    cam = (cubes[:, None, None, :] + corners[None] - centre) @ CAMERA.T  # (cubes, faces, 4, 3)
    screen = np.stack([size / 2 + scale * cam[..., 0], size / 2 - scale * cam[..., 1]], axis=-1).tolist()
    hidden = [[tuple(int(v) for v in cube + n) in taken for n in normals] for cube in cubes]
    for i in np.argsort(depth, kind="stable"):
        for f in range(len(visible)):
            if not hidden[i][f]:
                draw.polygon([tuple(p) for p in screen[i][f]], fill=colors[f], outline=OUTLINE, width=2)
    _draw_axes(draw, size)
    return image


def _draw_axes(draw: ImageDraw.ImageDraw, size: int) -> None:
    """The world axes as arrows from the lower-left corner, each labelled with its letter."""
    origin = np.array([0.12 * size, 0.88 * size])
    length = 0.08 * size
    for axis, (name, color) in enumerate(zip("xyz", AXIS_COLORS, strict=True)):
        x, y, _ = CAMERA[:, axis]
        tip = origin + length * np.array([x, -y])
        draw.line([tuple(origin), tuple(tip)], fill=color, width=max(2, size // 80))
        label = origin + 1.35 * length * np.array([x, -y])
        draw.text((float(label[0]) - 3, float(label[1]) - 6), name, fill=color)


def radius_of(cubes: np.ndarray) -> float:
    """Largest distance from the centroid to a cube corner (the same in every orientation)."""
    centre = cubes.mean(axis=0) + 0.5
    corners = (cubes[:, None, :] + np.array(list(np.ndindex(2, 2, 2)))[None]).reshape(-1, 3)
    return float(np.sqrt(((corners - centre) ** 2).sum(axis=1)).max())
