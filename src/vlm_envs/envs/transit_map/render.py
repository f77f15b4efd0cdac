"""Drawing a TransitMap network with Pillow: a schematic map (thick coloured lines, stops as dots,
interchanges as rings, every stop named) over a legend of the lines, and the markers of one moment (where
you are, the destination, the ride just taken). The map without markers is drawn once per episode; each
observation copies it and adds the markers, so its bytes depend only on the network, the stops marked and the
ride.
"""

from __future__ import annotations

import dataclasses
import itertools

from PIL import Image, ImageDraw

from vlm_envs.envs.transit_map.labels import place_labels
from vlm_envs.envs.transit_map.lettering import Lettering, ink_box
from vlm_envs.envs.transit_map.network import Line, Network

GROUND, INK, MARKER, RULE = (250, 248, 242), (25, 25, 25), (0, 0, 0), (200, 200, 200)
#: The destination's marker colour: a magenta no line has.
DESTINATION = (200, 0, 200)


def line_title(line: Line, numbered: bool) -> str:
    """How answers and the legend name a line: ``Red line`` or ``Line 3``."""
    return f"Line {line.name}" if numbered else f"{line.name} line"


def line_phrase(line: Line, numbered: bool) -> str:
    """A line in a sentence: ``the Red line`` or ``Line 3``."""
    return line_title(line, numbered) if numbered else f"the {line_title(line, numbered)}"


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Every size of the drawing, from the lattice ``spacing`` in pixels."""

    spacing: int

    @property
    def margin(self) -> int:
        return round(self.spacing * 0.85)

    @property
    def line_width(self) -> int:
        return max(4, self.spacing // 10)

    @property
    def dot(self) -> int:
        return max(4, round(self.spacing * 0.075))

    @property
    def ring(self) -> int:
        return max(6, round(self.spacing * 0.105))

    @property
    def marker(self) -> int:
        return max(10, round(self.spacing * 0.19))

    @property
    def font(self) -> int:
        return max(11, round(self.spacing * 0.18))


@dataclasses.dataclass(frozen=True)
class MapDrawing:
    """A network's map without markers, and where its stops are in it."""

    image: Image.Image
    centres: tuple[tuple[float, float], ...]
    sizes: Sizes
    #: Each stop's name's box (left, top, right, bottom), outline included.
    labels: tuple[tuple[int, int, int, int], ...]


def _legend_rows(
    titles: list[str], size: int, swatch: int, width: int, margin: int
) -> list[list[tuple[int, int]]]:
    """The legend's items (line index, x) in rows that fit between the margins."""
    rows: list[list[tuple[int, int]]] = [[]]
    x = margin
    for index, title in enumerate(titles):
        box = ink_box(title, size)
        item = swatch + 8 + box[2] - box[0]
        if rows[-1] and x + item > width - margin:
            rows.append([])
            x = margin
        rows[-1].append((index, x))
        x += item + 26
    return rows


def draw_map(network: Network, spacing: int, numbered: bool) -> MapDrawing:
    """The map of ``network`` with ``spacing`` pixels between lattice points, its legend below it."""
    sizes = Sizes(spacing)
    cols, rows = network.grid
    width = (cols - 1) * spacing + 2 * sizes.margin
    map_height = (rows - 1) * spacing + 2 * sizes.margin
    titles = [line_title(line, numbered) for line in network.lines]
    swatch, row_height = 2 * sizes.marker, sizes.font + 14
    legend = _legend_rows(titles, sizes.font, swatch, width, sizes.margin)
    image = Image.new("RGB", (width, map_height + row_height * len(legend) + 12), GROUND)
    draw = ImageDraw.Draw(image)
    centres = [(sizes.margin + c * spacing, sizes.margin + r * spacing) for c, r in network.points]
    for line in network.lines:
        draw.line([centres[s] for s in line.stops], fill=line.color, width=sizes.line_width, joint="curve")
    serving = network.serving
    for stop, (x, y) in enumerate(centres):
        interchange = len(serving[stop]) > 1
        r = sizes.ring if interchange else sizes.dot
        outline = INK if interchange else network.lines[serving[stop][0]].color
        draw.ellipse([x - r, y - r, x + r, y + r], fill="white", outline=outline, width=3)
    lettering = Lettering(image.size)
    boxes = place_labels(
        [_extent(ink_box(name, sizes.font)) for name in network.names],
        centres,
        sorted(range(len(centres)), key=lambda s: (len(serving[s]) < 2, network.points[s][::-1])),
        [(centres[a], centres[b]) for line in network.lines for a, b in itertools.pairwise(line.stops)],
        offset=sizes.marker + 3,
        dot=sizes.ring,
        bounds=(2, 2, width - 2, map_height - 2),
    )
    for name, box in zip(network.names, boxes, strict=True):
        lettering.write(name, sizes.font, box[:2])
    draw.line([(sizes.margin // 2, map_height), (width - sizes.margin // 2, map_height)], fill=RULE, width=1)
    for row, items in enumerate(legend):
        y = map_height + 6 + row_height * row + row_height // 2
        for index, x in items:
            draw.line([(x, y), (x + swatch, y)], fill=network.lines[index].color, width=sizes.line_width)
            box = ink_box(titles[index], sizes.font)
            lettering.write(titles[index], sizes.font, (x + swatch + 8, y - (box[3] - box[1]) // 2))
    lettering.paint(image, INK)
    return MapDrawing(image, tuple(centres), sizes, tuple(boxes))


def _extent(box: tuple[int, int, int, int]) -> tuple[int, int]:
    return box[2] - box[0], box[3] - box[1]


def marked(drawing: MapDrawing, at: int, destination: int, ride: tuple[int, ...] | None) -> Image.Image:
    """A copy of the map with the stops of the ``ride`` just taken traced in black, the destination in a
    magenta square and where you are in a thick black ring."""
    image = drawing.image.copy()
    draw = ImageDraw.Draw(image)
    sizes, centres = drawing.sizes, drawing.centres
    if ride is not None and len(ride) > 1:
        draw.line([centres[s] for s in ride], fill=MARKER, width=max(2, sizes.line_width // 3), joint="curve")
    x, y = centres[destination]
    r = sizes.marker
    draw.rectangle([x - r, y - r, x + r, y + r], outline=DESTINATION, width=4)
    x, y = centres[at]
    r = sizes.marker - 1
    draw.ellipse([x - r, y - r, x + r, y + r], outline=MARKER, width=5)
    return image


def network_text(network: Network, numbered: bool, colors: bool = False) -> str:
    """Each line's stops in order, one line each (``Red line: Musdale - Troli - Larwell``; with ``colors``,
    ``Line 3 (Blue): ...``)."""
    return "\n".join(
        line_title(line, numbered)
        + (f" ({line.color_name})" if colors else "")
        + ": "
        + " - ".join(network.names[s] for s in line.stops)
        for line in network.lines
    )
