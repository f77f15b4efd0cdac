"""Scenes drawn from a seed: objects of several shapes and colours, each with a distinct code, one target
whose colour and shape no other object shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vlm_envs.envs.zoom_search.config import CELL_GAP, ZoomSearchConfig
from vlm_envs.envs.zoom_search.glyphs import ALPHABET

SHAPES = ("circle", "square", "triangle", "diamond", "hexagon")
#: Colour names and their RGB values (palette entries 2.. of the canvas).
COLORS = {
    "red": (214, 48, 49),
    "blue": (41, 98, 200),
    "green": (39, 155, 72),
    "orange": (240, 140, 20),
    "purple": (136, 78, 178),
    "grey": (128, 128, 128),
}
COLOR_NAMES = tuple(COLORS)


@dataclass(frozen=True)
class SceneObject:
    """One object: its canvas box ``(x0, y0, x1, y1)`` (exclusive ends, multiples of the view scale)."""

    shape: str
    color: str
    code: str
    box: tuple[int, int, int, int]


@dataclass(frozen=True)
class Scene:
    """The objects of one episode; ``objects[target]`` is the one the question names."""

    objects: tuple[SceneObject, ...]
    target: int

    @property
    def target_object(self) -> SceneObject:
        return self.objects[self.target]

    def question(self) -> str:
        t = self.target_object
        return f"the {t.color} {t.shape}"


def _codes(rng: np.random.Generator, n: int, length: int) -> list[str]:
    codes: dict[str, None] = {}
    while len(codes) < n:
        codes.setdefault("".join(ALPHABET[int(i)] for i in rng.integers(len(ALPHABET), size=length)), None)
    return list(codes)


def generate_scene(config: ZoomSearchConfig, rng: np.random.Generator) -> Scene:
    """``distractors + 1`` objects in distinct cells of the canvas grid, the target's (colour, shape) unique.

    Half the distractors share the target's colour or its shape, so neither attribute alone finds it.
    """
    n = config.distractors + 1
    target_kind = (COLOR_NAMES[int(rng.integers(len(COLOR_NAMES)))], SHAPES[int(rng.integers(len(SHAPES)))])
    others = [(c, s) for c in COLOR_NAMES for s in SHAPES if (c, s) != target_kind]
    near = [k for k in others if k[0] == target_kind[0] or k[1] == target_kind[1]]
    kinds = [target_kind]
    for i in range(config.distractors):
        pool = near if i % 2 == 0 else others
        kinds.append(pool[int(rng.integers(len(pool)))])
    codes = _codes(rng, n, config.code_length)
    grid, scale = config.grid(), config.scale
    least, most = config.box_range()
    cell = config.canvas // grid
    cells = rng.choice(grid * grid, n, replace=False)
    objects = []
    for (color, shape), code, where in zip(kinds, codes, cells, strict=True):
        side = int(rng.integers(least // scale, most // scale + 1)) * scale
        row, col = divmod(int(where), grid)
        slack = (cell - CELL_GAP - side) // scale
        x0 = (col * cell + CELL_GAP // 2) // scale * scale + int(rng.integers(0, slack + 1)) * scale
        y0 = (row * cell + CELL_GAP // 2) // scale * scale + int(rng.integers(0, slack + 1)) * scale
        objects.append(SceneObject(shape, color, code, (x0, y0, x0 + side, y0 + side)))
    order = rng.permutation(n)  # the target is not always drawn first
    shuffled = tuple(objects[int(i)] for i in order)
    return Scene(shuffled, int(np.flatnonzero(order == 0)[0]))
