"""Geometry diagrams as data (:class:`Figure`) and their drawing with PIL, labels included."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont

from vlm_envs.envs.config import MAX_IMAGE_SIDE

Point = tuple[float, float]

#: Qwen-VL vision encoders cut images into 14 px patches merged 2x2, so sides in multiples of 28 px
#: map to whole tokens without resizing.
IMAGE_SIDE_MULTIPLE = 28
DEFAULT_IMAGE_SIZE = 336


@dataclass(frozen=True)
class Segment:
    """A line segment between two named points, with an optional label and tick marks."""

    a: str
    b: str
    label: str | None = None
    dashed: bool = False
    ticks: int = 0


@dataclass(frozen=True)
class AngleMark:
    """The angle at ``vertex`` from ray ``vertex->a`` to ray ``vertex->b`` (the smaller one)."""

    vertex: str
    a: str
    b: str
    label: str | None = None
    right: bool = False


@dataclass(frozen=True)
class Circle:
    """A circle around a named point."""

    center: str
    radius: float


@dataclass
class Figure:
    """Named points and what is drawn between them, in any unit (the renderer fits them to the image).

    Points whose name starts with ``_`` are drawn without a name.
    """

    points: dict[str, Point] = field(default_factory=dict)
    segments: list[Segment] = field(default_factory=list)
    angles: list[AngleMark] = field(default_factory=list)
    circles: list[Circle] = field(default_factory=list)
    free_labels: list[tuple[Point, str]] = field(default_factory=list)

    def seg(self, a: str, b: str, label: str | None = None, *, dashed: bool = False, ticks: int = 0) -> None:
        """Add a segment ``ab``."""
        self.segments.append(Segment(a, b, label, dashed, ticks))

    def polygon(self, names: list[str], labels: list[str | None] | None = None) -> None:
        """Add the closed polygon through ``names``; ``labels[i]`` labels the side from point i to i+1."""
        labels = labels or [None] * len(names)
        for i, name in enumerate(names):
            self.seg(name, names[(i + 1) % len(names)], labels[i])

    def angle(self, vertex: str, a: str, b: str, label: str | None = None, *, right: bool = False) -> None:
        """Mark the angle ``a-vertex-b``."""
        self.angles.append(AngleMark(vertex, a, b, label, right))


def check_image_size(size: int) -> int:
    """``size`` if it is a usable side length (an int multiple of 28, 112 to ``MAX_IMAGE_SIDE``), else
    ``ValueError``."""
    least = 4 * IMAGE_SIDE_MULTIPLE
    if (
        isinstance(size, bool)
        or not isinstance(size, int)
        or not least <= size <= MAX_IMAGE_SIDE
        or size % IMAGE_SIDE_MULTIPLE
    ):
        raise ValueError(
            f"image_size must be a multiple of {IMAGE_SIDE_MULTIPLE} px from {least} to {MAX_IMAGE_SIDE}, "
            f"got {size!r:.40}"
        )
    return size


class _Canvas:
    """Maps figure coordinates onto a square image (y up) and draws on it."""

    def __init__(self, figure: Figure, size: int):
        xs = [p[0] for p in figure.points.values()]
        ys = [p[1] for p in figure.points.values()]
        for c in figure.circles:
            cx, cy = figure.points[c.center]
            xs += [cx - c.radius, cx + c.radius]
            ys += [cy - c.radius, cy + c.radius]
        span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
        margin = 0.16 * size
        self.scale = (size - 2 * margin) / span
        self.ox = size / 2 - self.scale * (max(xs) + min(xs)) / 2
        self.oy = size / 2 + self.scale * (max(ys) + min(ys)) / 2
        self.size = size
        self.image = Image.new("RGB", (size, size), "white")
        self.draw = ImageDraw.Draw(self.image)
        self.font = ImageFont.load_default(size=max(11, round(size / 24)))
        self.line = max(1, round(size / 168))
        self.pts = {name: self.px(p) for name, p in figure.points.items()}
        self.centroid = (
            sum(p[0] for p in self.pts.values()) / len(self.pts),
            sum(p[1] for p in self.pts.values()) / len(self.pts),
        )

    def px(self, p: Point) -> Point:
        return (self.ox + self.scale * p[0], self.oy - self.scale * p[1])

    def text(self, at: Point, label: str, color: str = "black") -> None:
        left, top, right, bottom = self.font.getbbox(label)
        x = min(max(at[0] - (right - left) / 2, 1), self.size - (right - left) - 1)
        y = min(max(at[1] - (bottom + top) / 2, 1), self.size - bottom - 1)
        self.draw.text((x, y), label, fill=color, font=self.font)

    def away(self, at: Point, nx: float, ny: float) -> tuple[float, float]:
        """The unit normal ``(nx, ny)`` or its opposite, whichever points away from the centroid."""
        if (at[0] - self.centroid[0]) * nx + (at[1] - self.centroid[1]) * ny < 0:
            return -nx, -ny
        return nx, ny

    def segment(self, s: Segment) -> None:
        a, b = self.pts[s.a], self.pts[s.b]
        length = math.dist(a, b) or 1.0
        ux, uy = (b[0] - a[0]) / length, (b[1] - a[1]) / length
        if s.dashed:
            dash = 6 * self.line
            for start in range(0, int(length), 2 * dash):
                end = min(start + dash, length)
                p = (a[0] + ux * start, a[1] + uy * start)
                q = (a[0] + ux * end, a[1] + uy * end)
                self.draw.line([p, q], fill="black", width=self.line)
        else:
            self.draw.line([a, b], fill="black", width=self.line)
        mid = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
        nx, ny = self.away(mid, -uy, ux)
        for i in range(s.ticks):
            off = (i - (s.ticks - 1) / 2) * 4 * self.line
            c = (mid[0] + ux * off, mid[1] + uy * off)
            t = 4 * self.line
            self.draw.line(
                [(c[0] - nx * t, c[1] - ny * t), (c[0] + nx * t, c[1] + ny * t)], "black", self.line
            )
        if s.label:
            gap = self.size / 22
            self.text((mid[0] + nx * gap, mid[1] + ny * gap), s.label, color="#1a3fa0")

    def angle(self, m: AngleMark) -> None:
        v, a, b = self.pts[m.vertex], self.pts[m.a], self.pts[m.b]
        ta = math.atan2(a[1] - v[1], a[0] - v[0])
        tb = math.atan2(b[1] - v[1], b[0] - v[0])
        sweep = (tb - ta) % (2 * math.pi)
        if sweep > math.pi:
            ta, sweep = tb, 2 * math.pi - sweep
        r = self.size / 16
        if m.right:
            ua = (math.cos(ta), math.sin(ta))
            ub = (math.cos(ta + sweep), math.sin(ta + sweep))
            s = r * 0.6
            corner = [
                (v[0] + ua[0] * s, v[1] + ua[1] * s),
                (v[0] + (ua[0] + ub[0]) * s, v[1] + (ua[1] + ub[1]) * s),
                (v[0] + ub[0] * s, v[1] + ub[1] * s),
            ]
            self.draw.line(corner, fill="black", width=self.line)
        else:
            box = [v[0] - r, v[1] - r, v[0] + r, v[1] + r]
            self.draw.arc(box, math.degrees(ta), math.degrees(ta + sweep), fill="#b02020", width=self.line)
        if m.label:
            mid = ta + sweep / 2
            crowding = max(0.0, 1 - sweep / math.radians(60))  # narrow angles push their label outwards
            reach = r + self.size / 18 + crowding * self.size / 10
            self.text((v[0] + math.cos(mid) * reach, v[1] + math.sin(mid) * reach), m.label, color="#b02020")

    def point(self, name: str) -> None:
        x, y = self.pts[name]
        d = 1.5 * self.line
        self.draw.ellipse([x - d, y - d, x + d, y + d], fill="black")
        if name.startswith("_"):
            return
        dx, dy = x - self.centroid[0], y - self.centroid[1]
        norm = math.hypot(dx, dy) or 1.0
        gap = self.size / 26
        self.text((x + dx / norm * gap, y + dy / norm * gap), name)


def render(figure: Figure, size: int = DEFAULT_IMAGE_SIZE) -> Image.Image:
    """Draw ``figure`` on a white ``size`` x ``size`` RGB image."""
    canvas = _Canvas(figure, check_image_size(size))
    for c in figure.circles:
        cx, cy = canvas.pts[c.center]
        r = c.radius * canvas.scale
        canvas.draw.ellipse([cx - r, cy - r, cx + r, cy + r], outline="black", width=canvas.line)
    for s in figure.segments:
        canvas.segment(s)
    for m in figure.angles:
        canvas.angle(m)
    for name in figure.points:
        canvas.point(name)
    for at, label in figure.free_labels:
        canvas.text(canvas.px(at), label, color="#1a3fa0")
    return canvas.image
