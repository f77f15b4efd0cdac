"""Animations drawn from the seed: objects, their starts and velocities, simulated for the frames shown,
kept only where the true order is the only plausible one (:mod:`vlm_envs.envs.frame_order.order`) and
the objects collide as often as asked; then the frames' letters are shuffled.

Where collisions are asked for, pairs of objects are aimed at each other: each pair is given a meeting
point and tick and starts where its velocities bring it there in a straight line; the simulation then
says whether they did collide (a third object may get in the way, and the draw is repeated).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vlm_envs.envs.frame_order.config import FrameOrderConfig
from vlm_envs.envs.frame_order.motion import RADII, WORLD, Body, Motion, Vec, simulate
from vlm_envs.envs.frame_order.order import LETTERS, motion_matrix, order_gap, order_motion

#: The objects' colours by name (each object of an animation has its own), and their RGB.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 50, 47),
    "blue": (38, 110, 220),
    "green": (40, 160, 70),
    "orange": (245, 140, 20),
    "purple": (130, 70, 190),
    "black": (30, 30, 30),
}
SHAPES = ("ball", "box")
#: Draws tried before giving up (the least likely configs measured keep about one draw in ten).
MAX_DRAWS = 2000
#: Tries at aiming one pair, and at placing one other object apart from those placed.
PAIR_TRIES, PLACE_TRIES = 40, 50


class NoAnimationError(RuntimeError):
    """No draw within :data:`MAX_DRAWS` met the config's constraints."""


@dataclasses.dataclass(frozen=True)
class Animation:
    """What an episode shows: the objects, where they are in each frame (time order), the letter each
    frame is shown under, and how far the true order and the next least-moving one move the objects."""

    bodies: tuple[Body, ...]
    motion: Motion
    #: ``labels[t]``: the letter of the frame at time ``t`` (so the letters in time order: the answer).
    labels: tuple[str, ...]
    true_motion: int
    gap: int


def _velocity(cfg: FrameOrderConfig, rng: np.random.Generator) -> Vec:
    """A velocity of L1 size in ``min_speed..max_speed``, its direction drawn."""
    size = int(rng.integers(cfg.min_speed, cfg.max_speed + 1))
    across = int(rng.integers(0, size + 1))
    sx, sy = (int(s) for s in rng.choice([-1, 1], size=2))
    return sx * across, sy * (size - across)


def _inside(p: Vec, radius: int) -> bool:
    return radius <= p[0] <= WORLD - radius and radius <= p[1] <= WORLD - radius


def _apart(p: Vec, radius: int, placed: list[Body]) -> bool:
    return all(max(abs(p[0] - b.start[0]), abs(p[1] - b.start[1])) >= radius + b.radius + 2 for b in placed)


def _aimed_pair(
    cfg: FrameOrderConfig, radii: tuple[int, int], rng: np.random.Generator
) -> tuple[tuple[Vec, Vec], tuple[Vec, Vec]] | None:
    """Velocities and starts of two objects that meet: both reach one point at one tick along straight
    paths inside the box, starting apart; None where no such draw was found in a few tries."""
    ticks = (cfg.frames - 1) * cfg.ticks_per_frame
    for _ in range(PAIR_TRIES):
        v, w = _velocity(cfg, rng), _velocity(cfg, rng)
        meet = int(rng.integers(1, ticks + 1))
        point = (
            int(rng.integers(RADII[1], WORLD - RADII[1] + 1)),
            int(rng.integers(RADII[1], WORLD - RADII[1] + 1)),
        )
        a = (point[0] - v[0] * meet, point[1] - v[1] * meet)
        b = (point[0] - w[0] * meet, point[1] - w[1] * meet)
        apart = max(abs(a[0] - b[0]), abs(a[1] - b[1])) >= sum(radii) + 2
        if apart and _inside(a, radii[0]) and _inside(b, radii[1]):
            return (v, w), (a, b)
    return None


def _bodies(cfg: FrameOrderConfig, rng: np.random.Generator) -> list[Body] | None:
    """The objects of one draw (the first ``2 * min_collisions`` aimed at each other in pairs); None where
    they did not fit."""
    names = [list(COLOURS)[int(c)] for c in rng.permutation(len(COLOURS))[: cfg.objects]]
    looks = [(SHAPES[int(rng.integers(2))], int(rng.integers(RADII[0], RADII[1] + 1))) for _ in names]
    velocities = [_velocity(cfg, rng) for _ in names]
    starts: list[Vec | None] = [None] * cfg.objects
    for pair in range(cfg.min_collisions):
        i, j = 2 * pair, 2 * pair + 1
        aimed = _aimed_pair(cfg, (looks[i][1], looks[j][1]), rng)
        if aimed is None:
            return None
        (velocities[i], velocities[j]), (starts[i], starts[j]) = aimed
    placed: list[Body] = []
    for name, (shape, radius), velocity, start in zip(names, looks, velocities, starts, strict=True):
        for _ in range(1 if start is not None else PLACE_TRIES):
            if start is None:
                start = (
                    int(rng.integers(radius, WORLD - radius + 1)),
                    int(rng.integers(radius, WORLD - radius + 1)),
                )
            if _apart(start, radius, placed):
                break
            start = None
        if start is None:
            return None
        placed.append(Body(shape, name, radius, start, velocity))
    return placed


def generate(cfg: FrameOrderConfig, rng: np.random.Generator) -> Animation:
    """An animation meeting ``cfg``'s constraints, drawn from ``rng`` (draws that miss are redrawn)."""
    for _ in range(MAX_DRAWS):
        bodies = _bodies(cfg, rng)
        if bodies is None:
            continue
        motion = simulate(bodies, cfg.frames, cfg.ticks_per_frame)
        if motion.collisions < cfg.min_collisions:
            continue
        matrix = motion_matrix(motion.frames)
        gap = order_gap(matrix)
        if gap < cfg.min_gap:
            continue
        labels = tuple(LETTERS[int(i)] for i in rng.permutation(cfg.frames))
        return Animation(tuple(bodies), motion, labels, order_motion(matrix, range(cfg.frames)), gap)
    raise NoAnimationError(f"no animation met the constraints in {MAX_DRAWS} draws")
