"""Tower of Hanoi's views: three pegs with coloured disks (widths by size, each numbered), the goal peg
marked, as an image; and each peg's disks bottom to top as text.

The frame (base, poles, labels) and each disk are drawn once per size and pasted each turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.tower_of_hanoi.pegs import PEG_NAMES, Position, stacks

BACKGROUND, WOOD, GOAL, LABEL = (246, 242, 232), (120, 84, 52), (40, 150, 80), (40, 40, 48)
#: Disk colours, smallest first (cycled past ten disks).
COLOURS = (
    (230, 70, 60),
    (245, 150, 40),
    (240, 205, 50),
    (120, 190, 60),
    (50, 170, 160),
    (60, 120, 220),
    (120, 80, 200),
    (200, 80, 170),
    (150, 110, 80),
    (110, 110, 120),
)


@dataclass(frozen=True)
class _Layout:
    """Where things go in an image ``width`` wide for ``disks`` disks."""

    disks: int
    width: int

    @property
    def height(self) -> int:
        return self.width * 2 // 3

    @property
    def label_h(self) -> int:
        return self.height // 8

    @property
    def base_y(self) -> int:
        return self.height - self.label_h - self.height // 24

    @property
    def disk_h(self) -> int:
        return min(self.height // 12, (self.base_y - self.height // 8) // self.disks)

    def centre(self, peg: int) -> int:
        return self.width // 3 * peg + self.width // 6

    def half_width(self, disk: int) -> int:
        return (self.width // 6 - self.width // 60) * (disk + 1) // (self.disks + 1)


@lru_cache(maxsize=8)
def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


@lru_cache(maxsize=32)
def _frame(layout: _Layout, goal: int) -> Image.Image:
    """The base, the poles and the labels A, B, C (the goal's in green, marked "goal")."""
    w, h = layout.width, layout.height
    image = Image.new("RGB", (w, h), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rectangle((w // 40, layout.base_y, w - w // 40, layout.base_y + h // 24), fill=WOOD)
    font = _font(max(10, layout.label_h * 3 // 5))
    pole_top = layout.base_y - layout.disk_h * (layout.disks + 1)
    for peg in range(3):
        c = layout.centre(peg)
        draw.rectangle((c - max(2, w // 120), pole_top, c + max(2, w // 120), layout.base_y), fill=WOOD)
        text = PEG_NAMES[peg] + (" (goal)" if peg == goal else "")
        fill = GOAL if peg == goal else LABEL
        draw.text((c, h - layout.label_h // 2 - 2), text, fill=fill, font=font, anchor="mm")
    return image


@lru_cache(maxsize=64)
def _disk(layout: _Layout, disk: int) -> Image.Image:
    """Disk ``disk`` (1 the smallest) with its number, on the background colour."""
    half, h = layout.half_width(disk), layout.disk_h
    image = Image.new("RGB", (2 * half + 1, h - 2), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle(
        (0, 0, 2 * half, h - 3), radius=max(2, h // 4), fill=COLOURS[(disk - 1) % len(COLOURS)]
    )
    font = _font(max(8, h * 2 // 3))
    draw.text(
        (half, (h - 2) // 2),
        str(disk),
        fill=(255, 255, 255),
        font=font,
        anchor="mm",
        stroke_width=1,
        stroke_fill=LABEL,
    )
    return image


def pegs_image(pegs: Position, goal: int, width: int) -> Image.Image:
    """The three pegs and the disks on them, the goal peg's label in green."""
    layout = _Layout(len(pegs), width)
    image = _frame(layout, goal).copy()
    for peg, stack in enumerate(stacks(pegs)):
        for level, disk in enumerate(stack):
            top = layout.base_y - (level + 1) * layout.disk_h + 1
            image.paste(_disk(layout, disk), (layout.centre(peg) - layout.half_width(disk), top))
    return image


def pegs_text(pegs: Position, goal: int) -> str:
    """Each peg's disks bottom to top (1 is the smallest), the goal peg marked."""
    lines = []
    for peg, stack in enumerate(stacks(pegs)):
        disks = " ".join(map(str, stack)) if stack else "(empty)"
        lines.append(f"{PEG_NAMES[peg]}{' (goal)' if peg == goal else ''}: {disks}")
    return "\n".join(lines)
