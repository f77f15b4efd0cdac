"""The animation's physics, in exact integers: objects move at constant velocity in a square box, bounce off
its walls elastically and exchange velocities when they meet.

Positions and velocities are integers (world units, units per tick). Each tick every object moves by its
velocity; one that crosses a wall is reflected back inside with that velocity component negated. Then
each pair of objects (in a fixed order) whose squares overlap and approach each other along the axis of
their contact (the axis where their centres are further apart) swap that velocity component: the exact
outcome of an elastic collision of two equal masses meeting face on. Every object collides as its square
(a ball as the square around it), so no square roots or fractions enter and every process computes the
same animation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

#: Side of the square box, in world units (an image draws it at ``frame_size`` pixels).
WORLD = 160
#: The least and most half-size of an object, in world units.
RADII = (8, 12)

#: A position or velocity: (x, y), y growing downwards.
Vec = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Body:
    """One object's look and its start: shape, colour name, half-size, position and velocity."""

    shape: str  # "ball" or "box"
    colour: str
    radius: int
    start: Vec
    velocity: Vec


@dataclasses.dataclass(frozen=True)
class Motion:
    """Where each object is in each frame (``frames[t][i]``: object ``i`` at frame ``t``), and how many
    collisions between objects and bounces off walls happened between the first frame and the last."""

    frames: tuple[tuple[Vec, ...], ...]
    collisions: int
    bounces: int


def _reflect(p: int, v: int, radius: int) -> tuple[int, int, bool]:
    """Position and velocity on one axis after a move of ``v``, reflected off the walls at ``radius`` and
    ``WORLD - radius``; and whether it bounced."""
    p += v
    lo, hi = radius, WORLD - radius
    if p < lo:
        return 2 * lo - p, -v, True
    if p > hi:
        return 2 * hi - p, -v, True
    return p, v, False


def _collide(reach: int, p: list[int], q: list[int], v: list[int], w: list[int]) -> bool:
    """Two objects whose squares (half-sides adding to ``reach``) overlap and approach each other along
    their contact axis swap that component of their velocities (in place); whether they did."""
    dx, dy = q[0] - p[0], q[1] - p[1]
    if abs(dx) >= reach or abs(dy) >= reach:
        return False
    axis, gap = (0, dx) if abs(dx) >= abs(dy) else (1, dy)
    if (w[axis] - v[axis]) * gap >= 0:  # moving apart (or level) along that axis already
        return False
    v[axis], w[axis] = w[axis], v[axis]
    return True


def simulate(bodies: Sequence[Body], frames: int, ticks_per_frame: int) -> Motion:
    """The positions of ``bodies`` at ``frames`` moments ``ticks_per_frame`` ticks apart, the first at the
    start."""
    pos = [list(b.start) for b in bodies]
    vel = [list(b.velocity) for b in bodies]
    shown = [tuple((p[0], p[1]) for p in pos)]
    collisions = bounces = 0
    for tick in range(1, (frames - 1) * ticks_per_frame + 1):
        for i, body in enumerate(bodies):
            for axis in (0, 1):
                pos[i][axis], vel[i][axis], hit = _reflect(pos[i][axis], vel[i][axis], body.radius)
                bounces += hit
        for i in range(len(bodies)):
            for j in range(i + 1, len(bodies)):
                reach = bodies[i].radius + bodies[j].radius
                collisions += _collide(reach, pos[i], pos[j], vel[i], vel[j])
        if tick % ticks_per_frame == 0:
            shown.append(tuple((p[0], p[1]) for p in pos))
    return Motion(tuple(shown), collisions, bounces)
