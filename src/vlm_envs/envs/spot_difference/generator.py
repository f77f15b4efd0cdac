"""A scene and its images from a seed, with every difference checked visible on the rendered images.

:func:`vlm_envs.envs.spot_difference.scene.draw_plan` draws objects and differences; here each altered
image is rendered and measured cell by cell: a difference that changes fewer than ``MIN_CHANGED_PX``
pixels by ``MIN_CHANNEL_STEP`` is replaced by another kind (removal last, which always shows), and every
other cell, the grid and the labels must be identical to the original's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from vlm_envs.envs.spot_difference import render
from vlm_envs.envs.spot_difference.config import MIN_CHANGED_PX, SpotDifferenceConfig
from vlm_envs.envs.spot_difference.scene import KINDS, Scene, draw_plan, next_difference


@dataclass(frozen=True)
class Drawn:
    """A scene with its canvases (full resolution, for crops) and images (what the model sees), original
    first."""

    scene: Scene
    canvases: tuple[Image.Image, ...]
    images: tuple[Image.Image, ...]


def generate(config: SpotDifferenceConfig, rng: np.random.Generator) -> Drawn:
    """A scene whose every difference is visible and alone in its cell (see the module docstring)."""
    scene = draw_plan(rng, config)
    canvases = [render.draw_canvas(scene, 0, config)]
    images = [render.view(canvases[0])]
    tried: dict[int, tuple[str, ...]] = {d.cell: (d.kind,) for d in scene.differences}
    for copy in range(1, config.copies):
        for _ in range(len(KINDS)):
            canvas = render.draw_canvas(scene, copy, config)
            image = render.view(canvas)
            changes = render.changed_pixels(images[0], image, config)
            mine = {d.cell for d in scene.differences if d.copy == copy}
            others = [c for c in range(config.grid**2) if c not in mine]
            if changes.outside or changes.touched[others].any():
                raise AssertionError("a difference reached outside its cell")  # objects keep to their cells
            weak = [
                d for d in scene.differences if d.copy == copy and changes.strong[d.cell] < MIN_CHANGED_PX
            ]
            if not weak:
                break
            swapped = {}
            for d in weak:
                swapped[d.cell] = next_difference(rng, config, d.cell, d.before, copy, tried[d.cell])
                tried[d.cell] += (swapped[d.cell].kind,)
            scene = replace(scene, differences=tuple(swapped.get(d.cell, d) for d in scene.differences))
        else:
            raise AssertionError("a removal always shows")  # the smallest object covers > MIN_CHANGED_PX
        canvases.append(canvas)
        images.append(image)
    return Drawn(scene, tuple(canvases), tuple(images))
