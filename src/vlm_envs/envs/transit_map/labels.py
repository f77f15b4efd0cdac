"""Where each stop's name goes on the map: beside its dot, clear of other names, dots and lines.

Each stop tries eight places around its dot (right, left, above, below and the four corners), at a distance
that clears the markers drawn later; the place with the lowest cost wins, ties to the earlier place. A place
costs most when it leaves the map or overlaps a name already placed, much when it covers another stop's dot or
stands nearer another stop than its own (the name would be read as that stop's), and a little for each pixel
of line it covers. Interchanges are placed first (the most crowded spots), then the other stops row by row.
"""

from __future__ import annotations

import numpy as np

Box = tuple[int, int, int, int]
Segment = tuple[tuple[float, float], tuple[float, float]]
#: (x, y) unit offsets of the places tried around a dot, in order of preference, and which side of the box
#: faces the dot: -1 the box ends there, 1 it starts there, 0 it is centred on the dot.
_PLACES: tuple[tuple[float, float, int, int], ...] = (
    (1.0, 0.0, 1, 0),
    (-1.0, 0.0, -1, 0),
    (0.0, -1.0, 0, -1),
    (0.0, 1.0, 0, 1),
    (0.72, -0.72, 1, -1),
    (0.72, 0.72, 1, 1),
    (-0.72, -0.72, -1, -1),
    (-0.72, 0.72, -1, 1),
)
_OUTSIDE, _OVERLAP, _ON_STOP, _NEARER_OTHER, _ON_LINE = 10_000.0, 1000.0, 300.0, 300.0, 1.0
#: Pixels between the samples taken along each line segment.
_SAMPLE_PX = 3.0


def _line_samples(segments: list[Segment]) -> np.ndarray:
    """Points every :data:`_SAMPLE_PX` along each segment, shape (n, 2)."""
    points = [np.zeros((0, 2))]
    for (x0, y0), (x1, y1) in segments:
        count = max(2, int(np.hypot(x1 - x0, y1 - y0) / _SAMPLE_PX) + 1)
        t = np.linspace(0.0, 1.0, count)[:, None]
        points.append(np.hstack([x0 + (x1 - x0) * t, y0 + (y1 - y0) * t]))
    return np.vstack(points)


def _boxes_at(cx: float, cy: float, size: tuple[int, int], offset: float) -> np.ndarray:
    """The box (left, top, right, bottom) of each place around ``(cx, cy)``, shape (8, 4)."""
    width, height = size
    boxes = []
    for ux, uy, side_x, side_y in _PLACES:
        x, y = cx + ux * offset, cy + uy * offset
        left = round(x if side_x == 1 else x - width if side_x == -1 else x - width / 2)
        top = round(y if side_y == 1 else y - height if side_y == -1 else y - height / 2)
        boxes.append((left, top, left + width, top + height))
    return np.asarray(boxes, dtype=float)


def _inside(points: np.ndarray, boxes: np.ndarray, pad: float = 0.0) -> np.ndarray:
    """How many ``points`` (n, 2) each box (k, 4) holds, grown by ``pad``: shape (k,)."""
    x, y = points[None, :, 0], points[None, :, 1]
    held = (x >= boxes[:, :1] - pad) & (x <= boxes[:, 2:3] + pad) & (y >= boxes[:, 1:2] - pad)
    return np.count_nonzero(held & (y <= boxes[:, 3:4] + pad), axis=1)


def _distances(points: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Each point's distance to each box: shape (k, n)."""
    x, y = points[None, :, 0], points[None, :, 1]
    dx = np.maximum(np.maximum(boxes[:, :1] - x, x - boxes[:, 2:3]), 0.0)
    dy = np.maximum(np.maximum(boxes[:, 1:2] - y, y - boxes[:, 3:4]), 0.0)
    return np.hypot(dx, dy)


def place_labels(
    sizes: list[tuple[int, int]],
    centres: list[tuple[float, float]],
    order: list[int],
    segments: list[Segment],
    offset: float,
    dot: float,
    bounds: Box,
) -> list[Box]:
    """A box per stop (indexed like ``centres``) for a name of ``sizes[stop]`` (width, height), placed in
    ``order``: ``offset`` px from its centre, clear of dots of radius ``dot``, of the line ``segments`` and of
    the names placed before it, inside ``bounds``."""
    samples = _line_samples(segments)
    samples = samples[np.argsort(samples[:, 0], kind="stable")]
    stops = np.asarray(centres, dtype=float)
    placed = np.zeros((0, 4))
    boxes: dict[int, Box] = {}
    for stop in order:
        candidates = _boxes_at(*centres[stop], sizes[stop], offset)
        others = np.delete(stops, stop, axis=0)
        low, high = np.searchsorted(
            samples[:, 0], [candidates[:, 0].min(), candidates[:, 2].max()], side="left"
        )
        near = samples[low : high + 1]
        cost = _ON_LINE * _inside(near, candidates) + _ON_STOP * _inside(others, candidates, pad=dot)
        if len(others):
            own = _distances(stops[stop : stop + 1], candidates)[:, 0]
            cost += _NEARER_OTHER * (_distances(others, candidates).min(axis=1) <= own + 6.0)
        overlap = (
            (candidates[:, None, 0] < placed[None, :, 2])
            & (placed[None, :, 0] < candidates[:, None, 2])
            & (candidates[:, None, 1] < placed[None, :, 3])
            & (placed[None, :, 1] < candidates[:, None, 3])
        )
        cost += _OVERLAP * np.count_nonzero(overlap, axis=1)
        outside = (candidates[:, 0] < bounds[0]) | (candidates[:, 1] < bounds[1])
        cost += _OUTSIDE * (outside | (candidates[:, 2] > bounds[2]) | (candidates[:, 3] > bounds[3]))
        best = candidates[int(np.argmin(cost))]  # the first of the cheapest
        boxes[stop] = (int(best[0]), int(best[1]), int(best[2]), int(best[3]))
        placed = np.vstack([placed, best[None, :]])
    return [boxes[stop] for stop in range(len(centres))]
