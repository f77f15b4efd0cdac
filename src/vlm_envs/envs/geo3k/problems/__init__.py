"""Procedural geo3k-style problems: seeded, with exact answers and PIL diagrams, no downloads."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from vlm_envs.envs.config import plain
from vlm_envs.envs.geo3k.diagrams import DEFAULT_IMAGE_SIZE, check_image_size, render
from vlm_envs.envs.geo3k.problems.base import GENERATOR_SOURCE, Draft, Geo3kProblem, Redraw
from vlm_envs.envs.geo3k.problems.circles import circle
from vlm_envs.envs.geo3k.problems.polygons import angles, polygon
from vlm_envs.envs.geo3k.problems.triangles import right_triangle, similar, triangle

#: Problem kinds the generator knows, by name.
KINDS: dict[str, Callable[[np.random.Generator], Draft]] = {
    "triangle": triangle,
    "right_triangle": right_triangle,
    "circle": circle,
    "polygon": polygon,
    "angle": angles,
    "similar": similar,
}
_MAX_ATTEMPTS = 1000


def check_kinds(kinds: Sequence[str] | None) -> tuple[str, ...]:
    """The kinds to draw from (all when ``None``; one name or a list of them); ``ValueError`` naming any
    unknown kind or anything that is not a list of names."""
    if kinds is None:
        return tuple(KINDS)
    kinds = [kinds] if isinstance(kinds, str) else plain(kinds)
    if not isinstance(kinds, list | tuple) or not kinds:
        raise ValueError(f"kinds must be a kind or a non-empty list of kinds, got {kinds!r:.60}")
    unknown = [k for k in kinds if not isinstance(k, str) or k not in KINDS]
    if unknown:
        raise ValueError(f"unknown problem kind(s) {unknown!r:.200}; choose from {sorted(KINDS)}")
    return tuple(kinds)


def generate_problem(
    seed: int, kinds: Sequence[str] | None = None, image_size: int = DEFAULT_IMAGE_SIZE
) -> Geo3kProblem:
    """The problem for ``seed``: same seed, kinds and size give the same problem and image bytes."""
    chosen = check_kinds(kinds)
    check_image_size(image_size)
    seed_word = int(seed) % 2**64
    for attempt in range(_MAX_ATTEMPTS):
        rng = np.random.default_rng([seed_word, attempt])
        kind = chosen[int(rng.integers(len(chosen)))]
        try:
            draft = KINDS[kind](rng)
        except Redraw:
            continue
        return Geo3kProblem(
            text=f"<image>{draft.text}",
            answer=draft.answer,
            images=(render(draft.figure, image_size),),
            kind=kind,
            source=GENERATOR_SOURCE,
            id=f"{GENERATOR_SOURCE}-{seed_word}",
            solution=draft.solution,
        )
    raise RuntimeError(
        f"no valid {chosen} problem in {_MAX_ATTEMPTS} draws for seed {seed}"
    )  # pragma: no cover


__all__ = ["KINDS", "Geo3kProblem", "check_kinds", "generate_problem"]
