"""Matchstick's view: the equation laid out in matchsticks (seven-segment digits, ``+``, ``-``, ``=``)."""

from __future__ import annotations

from PIL import Image, ImageDraw

from vlm_envs.envs.matchstick.equation import SEGMENTS, Equation

BACK, STICK, HEAD = (38, 42, 52), (226, 190, 128), (196, 52, 36)


def _ends(symbol_sticks: frozenset[str], x: int, y: int, length: int) -> list[tuple[int, int, int, int]]:
    """Each stick of a symbol whose cell starts at (x, y), as (x0, y0, x1, y1), the head at (x0, y0)."""
    m = length // 4
    left, right, top, mid, bottom = x + m, x + m + length, y + m, y + m + length, y + m + 2 * length
    centre = (left + right) // 2
    where = {
        "a": (left, top, right, top),
        "b": (right, top, right, mid),
        "c": (right, mid, right, bottom),
        "d": (left, bottom, right, bottom),
        "e": (left, mid, left, bottom),
        "f": (left, top, left, mid),
        "g": (left, mid, right, mid),
        "h": (left, mid, right, mid),
        "v": (centre, mid - length // 2, centre, mid + length // 2),
        "=1": (left, mid - length // 4, right, mid - length // 4),
        "=2": (left, mid + length // 4, right, mid + length // 4),
    }
    return [where[s] for s in sorted(symbol_sticks)]


def equation_image(equation: Equation, length: int) -> Image.Image:
    """The equation in matchsticks, ``length`` pixels a stick."""
    layout = [*equation.left, equation.op, *equation.right, "=", *equation.result]
    cell_w, cell_h = length + 3 * length // 4, 2 * length + length // 2
    image = Image.new("RGB", (cell_w * len(layout) + length // 2, cell_h), BACK)
    draw = ImageDraw.Draw(image)
    width, inset, head = max(3, length // 6), max(2, length // 10), max(2, length // 8)
    for i, symbol in enumerate(layout):
        sticks = frozenset({"=1", "=2"}) if symbol == "=" else SEGMENTS[symbol]
        for x0, y0, x1, y1 in _ends(sticks, length // 4 + i * cell_w, 0, length):
            dx, dy = (inset if x1 > x0 else 0), (inset if y1 > y0 else 0)
            x0, y0, x1, y1 = x0 + dx, y0 + dy, x1 - dx, y1 - dy
            draw.line((x0, y0, x1, y1), fill=STICK, width=width)
            draw.ellipse((x0 - head, y0 - head, x0 + head, y0 + head), fill=HEAD)
    return image
