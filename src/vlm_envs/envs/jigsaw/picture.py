"""Jigsaw's pictures: drawn from the seed (gradient, stripes, large shapes, lettering that run across
tile edges), or one of the user's images picked by the seed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont, ImageOps

#: Image files read from ``image_dir`` (by suffix, case-insensitive).
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
_WORDS = ("RIVER", "MAPLE", "ORBIT", "CLOUD", "PIXEL", "TIGER", "OCEAN", "LUNAR", "FROST", "AMBER")


def _color(rng: np.random.Generator) -> tuple[int, int, int]:
    return tuple(int(v) for v in rng.integers(30, 226, size=3))  # type: ignore[return-value]


def drawn_picture(size: int, rng: np.random.Generator) -> Image.Image:
    """A picture whose content crosses tile edges: a diagonal two-colour gradient, a band of stripes,
    three large shapes and a word."""
    a, b = np.array(_color(rng), float), np.array(_color(rng), float)
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:size, 0:size] / (size - 1)
    t = (np.cos(angle) * xx + np.sin(angle) * yy + 1.5) / 3.0
    pixels = a[None, None, :] * (1 - t[..., None]) + b[None, None, :] * t[..., None]
    image = Image.fromarray(pixels.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    stripe, width = _color(rng), int(rng.integers(size // 24, size // 12))
    y0 = int(rng.integers(0, size // 2))
    for k in range(-size, 2 * size, 3 * width):
        draw.line([(k, y0), (k + size // 3, y0 + size // 2)], fill=stripe, width=width)
    for _ in range(3):
        cx, cy = (int(v) for v in rng.integers(0, size, size=2))
        r = int(rng.integers(size // 6, size // 3))
        box = (cx - r, cy - r, cx + r, cy + r)
        kind = int(rng.integers(3))
        fill, outline = _color(rng), _color(rng)
        if kind == 0:
            draw.ellipse(box, fill=fill, outline=outline, width=6)
        elif kind == 1:
            draw.rectangle(box, fill=fill, outline=outline, width=6)
        else:
            draw.polygon(
                [(cx, cy - r), (cx + r, cy + r), (cx - r, cy + r)], fill=fill, outline=outline, width=6
            )
    word = _WORDS[int(rng.integers(len(_WORDS)))]
    font = ImageFont.load_default(size=size // 5)
    left, top, right, bottom = draw.textbbox((0, 0), word, font=font)
    x = (size - (right - left)) // 2 - left
    y = int(rng.integers(size // 8, max(size // 8 + 1, size - (bottom - top) - size // 8))) - top
    draw.text((x, y), word, font=font, fill=_color(rng), stroke_width=3, stroke_fill=(255, 255, 255))
    return image


def image_files(image_dir: str) -> list[Path]:
    """The image files of ``image_dir``, sorted by name (the seed picks from this list)."""
    folder = Path(image_dir)
    try:
        if not folder.is_dir():
            raise ValueError(f"image_dir {image_dir!r:.200} is not a folder")
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    except OSError as err:  # unreadable, or a name the system refuses (too long)
        raise ValueError(f"image_dir {image_dir!r:.200} cannot be read: {err.strerror}") from None
    if not files:
        raise ValueError(f"image_dir {image_dir!r:.200} holds no image files ({', '.join(IMAGE_SUFFIXES)})")
    return files


def user_picture(path: Path, size: int) -> Image.Image:
    """The user's image cropped to its central square and resized to ``size``; ``ValueError`` when the
    file is not an image Pillow reads."""
    try:
        with Image.open(path) as im:
            return ImageOps.fit(im.convert("RGB"), (size, size), Image.Resampling.LANCZOS)
    except OSError as err:  # Pillow's UnidentifiedImageError and truncated files are OSErrors
        raise ValueError(f"the image {path.name!r} in image_dir cannot be read: {err}") from None
