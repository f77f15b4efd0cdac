"""Write the pictures of README.md and docs/envs.md under docs/: each env's first observation (its
images side by side) and ZoomSearch's oracle zoom. Run from the repository root:
``.venv/bin/python docs/make_pictures.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PIL import Image

from vlm_envs import build_env

DOCS = Path(__file__).parent
#: file -> (env, config, seed, reset options)
FIRST_OBSERVATIONS: dict[str, tuple[str, dict[str, Any], int, dict[str, Any] | None]] = {
    "sokoban.png": ("sokoban", {"grid_size": (8, 8), "num_boxes": 2}, 1, None),
    "geo3k.png": ("geo3k", {}, 2, None),
    "zoom_search.png": ("zoom_search", {}, 0, None),
    "chart_calc.png": ("chart_calc", {}, 0, {"kinds": ["grouped_bar"]}),
    "fog_maze_local.png": ("fog_maze", {}, 1, None),
    "fog_maze_first_person.png": ("fog_maze", {"view": "first_person"}, 1, None),
    "jigsaw.png": ("jigsaw", {}, 1, None),
    "mental_rotation.png": ("mental_rotation", {}, 1, None),
    "mental_rotation_mirror.png": ("mental_rotation", {"mode": "mirror", "min_cubes": 6}, 1, None),
    "frozen_lake.png": ("frozen_lake", {"difficulty": "medium"}, 2, None),
    "lights_out.png": ("lights_out", {}, 1, None),
    "tower_of_hanoi.png": ("tower_of_hanoi", {"difficulty": "hard"}, 2, None),
    "clock.png": ("clock", {"difficulty": "medium"}, 12, None),
    "sliding_puzzle.png": ("sliding_puzzle", {}, 1, None),
    "minesweeper.png": ("minesweeper", {}, 1, None),
    "rush_hour.png": ("rush_hour", {}, 1, None),
    "matchstick.png": ("matchstick", {"difficulty": "hard"}, 3, None),
}


def side_by_side(images: list[Image.Image]) -> Image.Image:
    """The observation's images in a row, 8 px apart on white."""
    width = sum(im.width for im in images) + 8 * (len(images) - 1)
    out = Image.new("RGB", (width, max(im.height for im in images)), (255, 255, 255))
    x = 0
    for im in images:
        out.paste(im, (x, 0))
        x += im.width + 8
    return out


def save(image: Image.Image, name: str) -> None:
    image.save(DOCS / name, optimize=True)
    print(f"{DOCS / name}  {(DOCS / name).stat().st_size // 1024} KB")


def main() -> None:
    for name, (env_name, config, seed, options) in FIRST_OBSERVATIONS.items():
        obs, _ = build_env(env_name, **config).reset(seed=seed, options=options)
        save(side_by_side(obs.images), name)
    zoom = build_env("zoom_search")
    zoom.reset(seed=0)
    crop, _, _ = zoom.step(zoom.oracle_response())
    save(crop.images[0], "zoom_search_zoom.png")


if __name__ == "__main__":
    main()
