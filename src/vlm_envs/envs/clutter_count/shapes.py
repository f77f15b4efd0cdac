"""The shapes and colours of ClutterCount, and each shape's pixels: the mask a shape covers, its outline
and its core (the pixels around its centre that no later object may cover).

A mask is a square boolean array of side ``2 * reach(radius) + 1`` with the shape's centre at its middle
pixel: the pixels whose centres lie inside the shape (numpy, no anti-aliasing), made once per kind, radius
and angle and cached.
"""

from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple

import numpy as np

Kind = Literal["circle", "square", "triangle", "star", "diamond", "hexagon", "cross"]
KINDS: tuple[Kind, ...] = ("circle", "square", "triangle", "star", "diamond", "hexagon", "cross")
PLURALS: dict[str, str] = {kind: f"{kind}es" if kind.endswith("s") else f"{kind}s" for kind in KINDS}

ColorName = Literal["red", "orange", "pink", "yellow", "green", "teal", "blue", "purple", "brown", "grey"]
#: Colour names and their RGB values; red, orange, pink and brown, and blue, purple and teal, are near.
COLORS: dict[str, tuple[int, int, int]] = {
    "red": (214, 40, 40),
    "orange": (242, 133, 24),
    "pink": (236, 112, 176),
    "yellow": (238, 206, 36),
    "green": (46, 158, 68),
    "teal": (22, 156, 160),
    "blue": (44, 92, 208),
    "purple": (134, 72, 186),
    "brown": (140, 88, 48),
    "grey": (128, 128, 128),
}
BACKGROUND = (248, 247, 242)
#: Every shape's 1 px outline, so two shapes of one colour stay apart where they touch.
OUTLINE = (34, 34, 34)
#: How far a shape's points reach from its centre, in radii (a square's corners, the furthest).
EXTENT = 1.17
#: The core: a shape's own pixels within this many radii of its centre.
CORE = 0.35


class ShapeMasks(NamedTuple):
    """A shape's pixels in its window: all it covers, its outline (a subset) and its core (a subset)."""

    mask: np.ndarray
    rim: np.ndarray
    core: np.ndarray


def reach(radius: int) -> int:
    """Pixels from a shape's centre to the edge of its window."""
    return math.ceil(EXTENT * radius) + 1


def cell_side(radius: int) -> int:
    """The side of a cell that holds a shape of ``radius`` at any angle with a pixel to spare."""
    return 2 * reach(radius) + 2


def _ring(n: int, radius: float, start: float) -> list[tuple[float, float]]:
    step = 2 * math.pi / n
    return [(radius * math.cos(start + step * i), radius * math.sin(start + step * i)) for i in range(n)]


def _convex_parts(kind: str, r: float) -> list[list[tuple[float, float]]]:
    """``kind`` (not a circle) as convex polygons around the origin, upright, y pointing down."""
    if kind == "square":
        s = 0.82 * r
        return [[(-s, -s), (s, -s), (s, s), (-s, s)]]
    if kind == "triangle":
        return [_ring(3, 1.15 * r, -math.pi / 2)]
    if kind == "star":  # the inner pentagon and a triangle on each of its sides
        tips, inner = _ring(5, 1.15 * r, -math.pi / 2), _ring(5, 0.5 * r, -math.pi / 2 + math.pi / 5)
        return [inner] + [[inner[i - 1], tips[i], inner[i]] for i in range(5)]
    if kind == "diamond":
        w, h = 0.62 * r, 1.1 * r
        return [[(0.0, -h), (w, 0.0), (0.0, h), (-w, 0.0)]]
    if kind == "hexagon":
        return [_ring(6, r, 0.0)]
    w, h = 0.3 * r, r  # cross: two bars
    return [[(-w, -h), (w, -h), (w, h), (-w, h)], [(-h, -w), (h, -w), (h, w), (-h, w)]]


def _inside(parts: list[list[tuple[float, float]]], side: int) -> np.ndarray:
    """The pixels of a ``side`` x ``side`` window (centre at its middle) whose centres lie inside (or on) one
    of the convex ``parts`` (window coordinates, any orientation): every edge of all parts at once."""
    starts, ends, signs, firsts = [], [], [], []
    for part in parts:
        area = sum(ax * by - bx * ay for (ax, ay), (bx, by) in zip(part, part[1:] + part[:1], strict=True))
        firsts.append(len(starts))
        starts += part
        ends += part[1:] + part[:1]
        signs += [1.0 if area > 0 else -1.0] * len(part)
    a, b, sign = np.array(starts), np.array(ends), np.array(signs)[:, None, None]
    grid = np.arange(side, dtype=float)
    xs, ys = grid[None, None, :], grid[None, :, None]
    dx, dy = (b[:, 0] - a[:, 0])[:, None, None], (b[:, 1] - a[:, 1])[:, None, None]
    cross = dx * (ys - a[:, 1, None, None]) - dy * (xs - a[:, 0, None, None])
    keep = cross * sign >= -1e-9
    mask = np.zeros((side, side), dtype=bool)
    for first, stop in zip(firsts, [*firsts[1:], len(starts)], strict=True):
        mask |= keep[first:stop].all(axis=0)
    return mask


@functools.lru_cache(maxsize=8192)
def shape_masks(kind: str, radius: int, angle: int) -> ShapeMasks:
    """The pixels of ``kind`` at ``radius`` turned ``angle`` degrees clockwise (read-only arrays)."""
    half = reach(radius)
    side = 2 * half + 1
    grid = np.arange(side) - half
    cols, rows = grid[None, :], grid[:, None]
    if kind == "circle":
        mask = cols * cols + rows * rows <= radius * radius
    else:
        a = math.radians(angle)
        cos, sin = math.cos(a), math.sin(a)
        parts = [
            [(half + x * cos - y * sin, half + x * sin + y * cos) for x, y in part]
            for part in _convex_parts(kind, radius)
        ]
        mask = _inside(parts, side)
    inner = np.zeros_like(mask)
    inner[1:-1, 1:-1] = mask[1:-1, 1:-1] & mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:]
    near = cols * cols + rows * rows <= (CORE * radius) ** 2
    arrays = ShapeMasks(mask, mask & ~inner, mask & near)
    for array in arrays:
        array.flags.writeable = False
    return arrays
