"""Scenes drawn from a seed: one object in most cells of the grid, and altered copies that differ from the
original in a few cells (an object missing, recoloured, moved, resized or reshaped), never two in one cell.

Objects stay inside their cell with a margin, so a difference changes its own cell only. Which differences
are kept is decided on the rendered images (:func:`vlm_envs.envs.spot_difference.render.changed_pixels`):
each must change at least ``MIN_CHANGED_PX`` pixels of its cell by ``MIN_CHANNEL_STEP`` or more; a change
that falls short is replaced by the next kind, the object's removal last (always visible: the smallest
object covers far more than the minimum).
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, replace

import numpy as np

from vlm_envs.envs.spot_difference.config import LABEL_MARGIN, SpotDifferenceConfig

#: Canvas pixels per image pixel: crops come from the canvas, the images are it box-averaged.
SCALE = 2
SHAPES = ("circle", "square", "triangle", "diamond", "hexagon")
#: Colour names and their RGB values; each has a near colour (its pair) that subtle recolours use.
COLORS = {
    "red": (214, 48, 49),
    "salmon": (240, 110, 100),
    "blue": (41, 98, 200),
    "sky blue": (80, 150, 230),
    "green": (39, 155, 72),
    "lime": (110, 190, 60),
    "orange": (240, 140, 20),
    "gold": (235, 190, 30),
    "purple": (136, 78, 178),
    "violet": (180, 120, 210),
    "grey": (110, 110, 110),
    "silver": (165, 165, 165),
}
COLOR_NAMES = tuple(COLORS)
#: The colours of a scene that is not subtle (every other entry: no two are near).
BASE_COLORS = COLOR_NAMES[::2]
KINDS = ("missing", "recoloured", "moved", "resized", "reshaped")
#: Object side as a fraction of the cell side: (least, most), plain and subtle.
SIZES = {False: (0.45, 0.7), True: (0.28, 0.42)}
#: The free band inside each cell's edge, as a fraction of the cell side.
PAD = 0.08


def near(color: str) -> str:
    """The colour paired with ``color`` (red and salmon, blue and sky blue, ...)."""
    i = COLOR_NAMES.index(color)
    return COLOR_NAMES[i ^ 1]


def cell_name(grid: int, cell: int) -> str:
    """``B3`` for the cell in column B (the second) and row 3 (the third)."""
    row, col = divmod(cell, grid)
    return f"{string.ascii_uppercase[col]}{row + 1}"


@dataclass(frozen=True)
class SceneObject:
    """One object: its shape, colour and canvas box ``(x0, y0, x1, y1)`` (exclusive ends)."""

    shape: str
    color: str
    box: tuple[int, int, int, int]

    @property
    def side(self) -> int:
        return self.box[2] - self.box[0]

    def described(self) -> str:
        return f"{self.color} {self.shape}"


@dataclass(frozen=True)
class Difference:
    """How altered copy ``copy`` (1 or 2) differs in ``cell``: ``after`` is its object there (None: gone)."""

    cell: int
    kind: str
    copy: int
    before: SceneObject
    after: SceneObject | None


@dataclass(frozen=True)
class Scene:
    """The original's objects by cell and the differences of the altered copies, in cell order."""

    grid: int
    objects: tuple[tuple[int, SceneObject], ...]
    differences: tuple[Difference, ...]

    def image_objects(self, copy: int) -> list[tuple[int, SceneObject]]:
        """The objects of image ``copy`` (0 the original) by cell, in cell order."""
        changed = {d.cell: d.after for d in self.differences if d.copy == copy}
        shown = [(cell, changed.get(cell, obj)) for cell, obj in self.objects]
        return [(cell, obj) for cell, obj in shown if obj is not None]

    @property
    def cells(self) -> tuple[int, ...]:
        """The differing cells, in cell order."""
        return tuple(d.cell for d in self.differences)

    def names(self) -> list[str]:
        """The differing cells' names (``B2``), in cell order."""
        return [cell_name(self.grid, c) for c in self.cells]


def cell_box(config: SpotDifferenceConfig, cell: int) -> tuple[int, int, int, int]:
    """A cell's canvas box (exclusive ends)."""
    side = config.cell_px * SCALE
    row, col = divmod(cell, config.grid)
    x0, y0 = LABEL_MARGIN * SCALE + col * side, LABEL_MARGIN * SCALE + row * side
    return x0, y0, x0 + side, y0 + side


def _inner(config: SpotDifferenceConfig, cell: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = cell_box(config, cell)
    pad = math.ceil((x1 - x0) * PAD)
    return x0 + pad, y0 + pad, x1 - pad, y1 - pad


def _place(
    rng: np.random.Generator, inner: tuple[int, int, int, int], side: int
) -> tuple[int, int, int, int]:
    x = int(rng.integers(inner[0], inner[2] - side + 1))
    y = int(rng.integers(inner[1], inner[3] - side + 1))
    return x, y, x + side, y + side


def _object(rng: np.random.Generator, config: SpotDifferenceConfig, cell: int) -> SceneObject:
    least, most = SIZES[config.subtle]
    c = config.cell_px * SCALE
    side = int(rng.integers(round(least * c), round(most * c) + 1))
    colors = COLOR_NAMES if config.subtle else BASE_COLORS
    shape = SHAPES[int(rng.integers(len(SHAPES)))]
    return SceneObject(shape, colors[int(rng.integers(len(colors)))], _place(rng, _inner(config, cell), side))


def altered(
    rng: np.random.Generator, config: SpotDifferenceConfig, cell: int, obj: SceneObject, kind: str
) -> SceneObject | None:
    """``obj`` changed by ``kind`` (None where the kind does not fit its cell, or for ``missing``)."""
    inner = _inner(config, cell)
    if kind == "recoloured":
        colors = [c for c in BASE_COLORS if c != obj.color]
        new = near(obj.color) if config.subtle else colors[int(rng.integers(len(colors)))]
        return replace(obj, color=new)
    if kind == "reshaped":
        shapes = [s for s in SHAPES if s != obj.shape]
        return replace(obj, shape=shapes[int(rng.integers(len(shapes)))])
    if kind == "moved":
        least = math.ceil(obj.side * (0.35 if config.subtle else 0.4))
        span_x, span_y = inner[2] - obj.side - inner[0], inner[3] - obj.side - inner[1]
        corners = [(inner[0] + a * span_x, inner[1] + b * span_y) for a in (0, 1) for b in (0, 1)]
        tries = [
            (inner[0] + int(rng.integers(span_x + 1)), inner[1] + int(rng.integers(span_y + 1)))
            for _ in range(24)
        ]
        far = [(x, y) for x, y in tries + corners if max(abs(x - obj.box[0]), abs(y - obj.box[1])) >= least]
        if not far:
            return None
        x, y = far[0]
        return replace(obj, box=(x, y, x + obj.side, y + obj.side))
    if kind == "resized":
        factors = (0.75, 1.3) if config.subtle else (0.6, 1.5)
        fits = []
        for factor in factors:
            side = round(obj.side * factor)
            cx, cy = (obj.box[0] + obj.box[2]) // 2, (obj.box[1] + obj.box[3]) // 2
            x0 = min(max(cx - side // 2, inner[0]), inner[2] - side)
            y0 = min(max(cy - side // 2, inner[1]), inner[3] - side)
            if x0 >= inner[0] and y0 >= inner[1]:
                fits.append(replace(obj, box=(x0, y0, x0 + side, y0 + side)))
        return fits[int(rng.integers(len(fits)))] if fits else None
    return None  # missing


def draw_plan(rng: np.random.Generator, config: SpotDifferenceConfig) -> Scene:
    """Objects and differences drawn from ``rng``, before the rendered check of their visibility."""
    n = config.grid * config.grid
    low, high = config.differences
    count = int(rng.integers(low, high + 1))
    occupied = max(count, math.ceil(0.75 * n))
    cells = sorted(int(c) for c in rng.choice(n, occupied, replace=False))
    objects = tuple((cell, _object(rng, config, cell)) for cell in cells)
    chosen = sorted(int(i) for i in rng.choice(occupied, count, replace=False))
    differences = []
    for i in chosen:
        cell, obj = objects[i]
        copy = 1 + int(rng.integers(config.altered))
        differences.append(next_difference(rng, config, cell, obj, copy, tried=()))
    return Scene(config.grid, objects, tuple(differences))


def next_difference(
    rng: np.random.Generator,
    config: SpotDifferenceConfig,
    cell: int,
    obj: SceneObject,
    copy: int,
    tried: tuple[str, ...],
) -> Difference:
    """A difference of a kind not yet ``tried`` for this object, drawn among those that fit its cell; once
    another kind was tried, ``missing`` comes last (it always fits and always shows)."""
    kinds = [k for k in KINDS if k not in tried and (k != "missing" or not tried)]
    for j in rng.permutation(len(kinds)):
        kind = kinds[int(j)]
        after = altered(rng, config, cell, obj, kind)
        if after is not None or kind == "missing":
            return Difference(cell, kind, copy, obj, after)
    return Difference(cell, "missing", copy, obj, None)
