"""Write a PNG of the first observation of FogMaze (both views), Jigsaw and MentalRotation under docs/.

Run from the repository root: ``python docs/pictures_21.py``.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from vlm_envs.registry import build_env

DOCS = Path(__file__).parent
PICTURES = {
    "fog_maze_local.png": ("vlm_envs.envs.fog_maze", {}),
    "fog_maze_first_person.png": ("vlm_envs.envs.fog_maze", {"view": "first_person"}),
    "jigsaw.png": ("vlm_envs.envs.jigsaw", {}),
    "mental_rotation.png": ("vlm_envs.envs.mental_rotation", {}),
    "mental_rotation_mirror.png": ("vlm_envs.envs.mental_rotation", {"mode": "mirror", "min_cubes": 6}),
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


def main() -> None:
    for name, (target, config) in PICTURES.items():
        obs, _ = build_env(target, **config).reset(seed=1)
        side_by_side(obs.images).save(DOCS / name, optimize=True)
        print(DOCS / name)


if __name__ == "__main__":
    main()
