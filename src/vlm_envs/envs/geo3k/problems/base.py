"""What a Geo3k problem is, for both the generator and datasets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from vlm_envs.envs.geo3k.diagrams import Figure

#: Label of the source of generated problems (datasets use their own name).
GENERATOR_SOURCE = "generator"


@dataclass(frozen=True)
class Geo3kProblem:
    """One problem: statement, ground-truth answer, diagram images, and where it came from.

    ``text`` may hold ``<image>`` placeholders (one per image) as geo3k rows do; ``answer`` is the
    label in geo3k's forms (``12``, ``8.5``, ``2\\sqrt{3}``, ``\\frac{5}{2}``, ``16\\pi``).
    """

    text: str
    answer: str
    images: tuple[Image.Image, ...] = ()
    kind: str = "dataset"
    source: str = GENERATOR_SOURCE
    id: str = ""
    #: How the answer follows from the diagram, in a sentence or two (generated problems; "" for rows).
    solution: str = ""


@dataclass
class Draft:
    """A generated problem before rendering: statement, exact answer, and its figure."""

    text: str
    answer: str
    figure: Figure = field(default_factory=Figure)
    #: How the answer follows from the figure's labels (becomes ``Geo3kProblem.solution``).
    solution: str = ""


class Redraw(Exception):
    """The random draw gave a degenerate or ambiguous problem; draw again."""


def polar(center: tuple[float, float], radius: float, degrees: float) -> tuple[float, float]:
    """The point at ``radius`` from ``center`` in direction ``degrees`` (counter-clockwise from +x)."""
    t = math.radians(degrees)
    return (center[0] + radius * math.cos(t), center[1] + radius * math.sin(t))


def pick(rng: np.random.Generator, options: list) -> object:
    """One element of ``options`` chosen by ``rng``."""
    return options[int(rng.integers(len(options)))]


def randint(rng: np.random.Generator, low: int, high: int) -> int:
    """An integer in ``[low, high]`` inclusive."""
    return int(rng.integers(low, high + 1))
