"""Scenes drawn from a seed: overlapping shapes of a few kinds and colours, one (colour, kind) to count.

Objects are placed one at a time in draw order, each on top of those before it; ``overlap`` of them are
put against an object already drawn, the rest anywhere. A place is taken only if every object keeps what
makes it countable: its core (the pixels around its centre, :data:`~.shapes.CORE`) uncovered, and at least
``min_visible`` of its pixels and :data:`MIN_VISIBLE_PX` visible. An object finds no such place in
:data:`PLACES` draws: the scene is drawn again (:data:`ATTEMPTS` times), then laid out side by side in
the cells of a grid, which the config guarantees fits. So every seed gives a scene, and a target's centre
pixel is always its own: the reference player marks there.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from vlm_envs.envs.clutter_count.config import ClutterCountConfig
from vlm_envs.envs.clutter_count.shapes import COLORS, PLURALS, cell_side, reach, shape_masks

#: Every object keeps at least this many pixels visible, whatever ``min_visible`` says.
MIN_VISIBLE_PX = 30
#: Places tried for one object before the scene is drawn again.
PLACES = 40
#: Scenes drawn before the side-by-side layout.
ATTEMPTS = 6


@dataclasses.dataclass(frozen=True)
class Piece:
    """One object: its kind and colour, centre pixel, radius (px) and clockwise turn (degrees)."""

    kind: str
    color: str
    x: int
    y: int
    radius: int
    angle: int


@dataclasses.dataclass(frozen=True, eq=False)
class Scene:
    """The objects of one episode in draw order (later ones on top), the (colour, kind) asked, and which
    object shows at each pixel (``owner``: its index, -1 for the background; ``rim``: its outline)."""

    pieces: tuple[Piece, ...]
    color: str
    kind: str
    owner: np.ndarray
    rim: np.ndarray
    #: Each object's visible pixels.
    visible: tuple[int, ...]
    #: Each object's pixels when nothing covers it.
    area: tuple[int, ...]
    #: Whether the scene is the side-by-side layout (every attempt at clutter failed).
    fallback: bool = False

    @functools.cached_property
    def targets(self) -> tuple[int, ...]:
        """The indices of the objects the question counts."""
        return tuple(i for i, p in enumerate(self.pieces) if (p.color, p.kind) == (self.color, self.kind))

    @property
    def count(self) -> int:
        return len(self.targets)

    def asked(self) -> str:
        """``red stars``."""
        return f"{self.color} {PLURALS[self.kind]}"

    def partly_hidden(self) -> int:
        """How many targets another object covers in part."""
        return sum(self.visible[i] < self.area[i] for i in self.targets)


def _specs(config: ClutterCountConfig, rng: np.random.Generator) -> tuple[str, str, list[tuple[str, str]]]:
    """The asked colour and kind, and every object's (colour, kind) in draw order: the targets, at least one
    object of the target's colour and another kind and one of its kind and another colour, the rest drawn
    among those two sorts and any other. Same-kind distractors take one of the two palette colours nearest
    the target's half the time."""
    kinds, colors = config.palette()
    color, kind = colors[int(rng.integers(len(colors)))], kinds[int(rng.integers(len(kinds)))]
    objects = int(rng.integers(config.objects[0], config.objects[1] + 1))
    targets = int(rng.integers(config.targets[0], config.targets[1] + 1))
    other_kinds = [k for k in kinds if k != kind]
    other_colors = [c for c in colors if c != color]
    near = sorted(other_colors, key=lambda c: (math.dist(COLORS[c], COLORS[color]), c))[:2]
    anything = [(c, k) for c in colors for k in kinds if (c, k) != (color, kind)]

    def same_color() -> tuple[str, str]:
        return color, other_kinds[int(rng.integers(len(other_kinds)))]

    def same_kind() -> tuple[str, str]:
        pool = near if rng.random() < 0.5 else other_colors
        return pool[int(rng.integers(len(pool)))], kind

    specs = [(color, kind)] * targets + [same_color(), same_kind()]
    for _ in range(objects - len(specs)):
        sort = int(rng.integers(3))
        specs.append(
            same_color()
            if sort == 0
            else same_kind()
            if sort == 1
            else anything[int(rng.integers(len(anything)))]
        )
    order = rng.permutation(len(specs))
    return color, kind, [specs[int(i)] for i in order]


class _Canvas:
    """The owner and rim of every pixel while objects are placed, and what each object still shows."""

    def __init__(self, side: int) -> None:
        self.side = side
        self.owner = np.full((side, side), -1, dtype=np.int16)
        self.rim = np.zeros((side, side), dtype=bool)
        self.cores = np.zeros((side, side), dtype=bool)
        self.pieces: list[Piece] = []
        self.visible: list[int] = []
        self.area: list[int] = []
        self.needed: list[int] = []

    def fits(self, piece: Piece) -> bool:
        """Whether ``piece`` drawn on top leaves every object its core and its visible share."""
        masks = shape_masks(piece.kind, piece.radius, piece.angle)
        half = reach(piece.radius)
        if not (half <= piece.x < self.side - half and half <= piece.y < self.side - half):
            return False
        window = np.s_[piece.y - half : piece.y + half + 1, piece.x - half : piece.x + half + 1]
        if (self.cores[window] & masks.mask).any():
            return False
        under = self.owner[window][masks.mask]
        under = under[under >= 0]
        if not under.size:
            return True
        lost = np.bincount(under, minlength=len(self.pieces))
        return bool((np.asarray(self.visible) - lost >= np.asarray(self.needed)).all())

    def add(self, piece: Piece, min_visible: float) -> None:
        """Draw ``piece`` on top (it must fit)."""
        masks = shape_masks(piece.kind, piece.radius, piece.angle)
        half = reach(piece.radius)
        window = np.s_[piece.y - half : piece.y + half + 1, piece.x - half : piece.x + half + 1]
        owner = self.owner[window]
        under = owner[masks.mask]
        for index, lost in enumerate(np.bincount(under[under >= 0], minlength=len(self.pieces))):
            self.visible[index] -= int(lost)
        owner[masks.mask] = len(self.pieces)
        self.rim[window][masks.mask] = masks.rim[masks.mask]
        self.cores[window] |= masks.core
        area = int(masks.mask.sum())
        self.pieces.append(piece)
        self.visible.append(area)
        self.area.append(area)
        self.needed.append(max(MIN_VISIBLE_PX, math.ceil(min_visible * area)))

    def scene(self, color: str, kind: str, fallback: bool) -> Scene:
        self.owner.flags.writeable = self.rim.flags.writeable = False
        return Scene(
            tuple(self.pieces),
            color,
            kind,
            self.owner,
            self.rim,
            tuple(self.visible),
            tuple(self.area),
            fallback,
        )


def _piece(
    config: ClutterCountConfig, rng: np.random.Generator, spec: tuple[str, str]
) -> tuple[str, str, int, int]:
    radius = int(rng.integers(config.radius[0], config.radius[1] + 1))
    angle = int(rng.integers(360)) if config.rotate and spec[1] != "circle" else 0
    return spec[1], spec[0], radius, angle


def _cluttered(
    config: ClutterCountConfig, rng: np.random.Generator, specs: list[tuple[str, str]]
) -> _Canvas | None:
    """The objects placed in order with overlap; ``None`` when one finds no place."""
    canvas = _Canvas(config.image_size)
    for spec in specs:
        kind, color, radius, angle = _piece(config, rng, spec)
        half = reach(radius)
        for _ in range(PLACES):
            if canvas.pieces and rng.random() < config.overlap:
                anchor = canvas.pieces[int(rng.integers(len(canvas.pieces)))]
                gap = float(rng.uniform(0.55, 1.05)) * (anchor.radius + radius)
                turn = float(rng.uniform(0.0, 2 * math.pi))
                x, y = round(anchor.x + gap * math.cos(turn)), round(anchor.y + gap * math.sin(turn))
            else:
                x = int(rng.integers(half, config.image_size - half))
                y = int(rng.integers(half, config.image_size - half))
            piece = Piece(kind, color, x, y, radius, angle)
            if canvas.fits(piece):
                canvas.add(piece, config.min_visible)
                break
        else:
            return None
    return canvas


def _side_by_side(
    config: ClutterCountConfig, rng: np.random.Generator, specs: list[tuple[str, str]]
) -> _Canvas:
    """The objects in distinct cells of a grid, none overlapping (the config guarantees the cells)."""
    cell = cell_side(config.radius[1])
    per_row = config.image_size // cell
    canvas = _Canvas(config.image_size)
    for spec, where in zip(specs, rng.choice(per_row * per_row, len(specs), replace=False), strict=True):
        kind, color, radius, angle = _piece(config, rng, spec)
        row, col = divmod(int(where), per_row)
        slack = cell - cell_side(radius)
        x = col * cell + reach(radius) + int(rng.integers(slack + 1))
        y = row * cell + reach(radius) + int(rng.integers(slack + 1))
        canvas.add(Piece(kind, color, x, y, radius, angle), config.min_visible)
    return canvas


def generate_scene(config: ClutterCountConfig, rng: np.random.Generator) -> Scene:
    """A scene of ``config`` drawn from ``rng`` (see the module docstring)."""
    color, kind, specs = _specs(config, rng)
    for _ in range(ATTEMPTS):
        canvas = _cluttered(config, rng, specs)
        if canvas is not None:
            return canvas.scene(color, kind, fallback=False)
    return _side_by_side(config, rng, specs).scene(color, kind, fallback=True)
