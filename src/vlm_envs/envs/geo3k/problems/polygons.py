"""Generated problems about polygons and angles."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from vlm_envs.envs.geo3k.diagrams import Figure
from vlm_envs.envs.geo3k.problems.answers import PRECISION_WORDS, near_rounding_tie, rounded, surd_latex
from vlm_envs.envs.geo3k.problems.base import Draft, Redraw, pick, polar, randint
from vlm_envs.envs.geo3k.problems.triangles import RADICAL, angle_term, exact_or_rounded

POLYGON_NAMES = {
    5: "pentagon",
    6: "hexagon",
    7: "heptagon",
    8: "octagon",
    9: "nonagon",
    10: "decagon",
    12: "dodecagon",
}


def polygon(rng: np.random.Generator) -> Draft:
    """Regular polygon angles, quadrilateral angle sums, areas of rectangles, parallelograms, trapezoids."""
    variant = pick(rng, ["regular", "quad_angles", "rectangle", "parallelogram", "trapezoid"])
    fig = Figure()
    if variant == "regular":
        n = pick(rng, sorted(POLYGON_NAMES))
        names = [f"_{i}" for i in range(n)]
        for i, name in enumerate(names):
            fig.points[name] = polar((0.0, 0.0), 1.0, 90 + 360 * i / n)
        for i, name in enumerate(names):
            fig.seg(name, names[(i + 1) % n], ticks=1)
        fig.angle(names[1], names[0], names[2], "x°")
        value = Fraction(180 * (n - 2), n)
        text = f"The {POLYGON_NAMES[n]} is regular. Find x."
        solution = (
            f"Each interior angle of a regular polygon with {n} sides is 180 · ({n} - 2) / {n} degrees."
        )
        if value.denominator != 1:
            return Draft(f"{text} Round to {PRECISION_WORDS[1]}.", rounded(value, 1), fig, solution)
        return Draft(text, str(value.numerator), fig, solution)
    if variant == "quad_angles":
        k1, k2, x = randint(rng, 1, 3), randint(rng, 1, 3), randint(rng, 10, 50)
        c1, c2 = 5 * randint(rng, -3, 8), 5 * randint(rng, -3, 8)
        third = 5 * randint(rng, 12, 30)
        angles = [k1 * x + c1, k2 * x + c2, third, 360 - (k1 * x + c1) - (k2 * x + c2) - third]
        if min(angles) < 45 or max(angles) > 160:
            raise Redraw
        fig.points = _quadrilateral(angles)
        names = list(fig.points)
        fig.polygon(names)
        labels = [angle_term(k1, c1), angle_term(k2, c2), f"{third}°", f"{angles[3]}°"]
        for i, label in enumerate(labels):
            fig.angle(names[i], names[i - 1], names[(i + 1) % 4], label)
        solution = f"The angles of a quadrilateral add up to 360°: {' + '.join(labels)} = 360°."
        return Draft("Find x.", str(x), fig, solution)
    a, b = randint(rng, 3, 20), randint(rng, 3, 20)
    if variant == "rectangle":
        fig.points = {"A": (0.0, 0.0), "B": (float(a), 0.0), "C": (float(a), float(b)), "D": (0.0, float(b))}
        fig.polygon(["A", "B", "C", "D"], [str(a), str(b), None, None])
        fig.angle("A", "B", "D", right=True)
        if rng.random() < 0.5:
            fig.seg("A", "C", "x", dashed=True)
            exact = math.isqrt(a * a + b * b) ** 2 == a * a + b * b
            solution = (
                f"The diagonal x is the hypotenuse of a right triangle: x² = {a}² + {b}² = {a * a + b * b}."
            )
            text = "Find x." if exact else f"Find x. {RADICAL}"
            return Draft(text, surd_latex(1, a * a + b * b), fig, solution)
        return Draft(
            "Find the area of the rectangle.", str(a * b), fig, f"The area is length times width: {a} · {b}."
        )
    if variant == "parallelogram":
        angle = randint(rng, 35, 80)
        corner = polar((0.0, 0.0), b, angle)
        fig.points = {"A": (0.0, 0.0), "B": (float(a), 0.0), "C": (a + corner[0], corner[1]), "D": corner}
        fig.polygon(["A", "B", "C", "D"], [str(a), None, None, str(b)])
        fig.angle("A", "B", "D", f"{angle}°")
        value = a * b * math.sin(math.radians(angle))
        if near_rounding_tie(value, 1):
            raise Redraw
        solution = (
            f"The area is the two sides times the sine of the angle between them: {a} · {b} · sin {angle}°."
        )
        return Draft(
            f"Find the area of the parallelogram. Round to {PRECISION_WORDS[1]}.",
            rounded(value, 1),
            fig,
            solution,
        )
    top, height = randint(rng, 2, 15), randint(rng, 3, 12)
    shift = float(rng.uniform(0, max(a - top, 1)))
    fig.points = {
        "A": (0.0, 0.0),
        "B": (float(a + max(top - a, 0)), 0.0),
        "C": (shift + top, float(height)),
        "D": (shift, float(height)),
        "_H": (shift, 0.0),
    }
    fig.polygon(["A", "B", "C", "D"], [str(max(a, top)), None, str(top), None])
    fig.seg("D", "_H", str(height), dashed=True)
    fig.angle("_H", "B", "D", right=True)
    note, answer = exact_or_rounded(rng, Fraction((max(a, top) + top) * height, 2))
    sides = f"({max(a, top)} + {top})"
    solution = f"The area is half the sum of the parallel sides times the height: (1/2) · {sides} · {height}."
    return Draft(f"Find the area of the trapezoid.{note}", answer, fig, solution)


def _quadrilateral(angles: list[int]) -> dict[str, tuple[float, float]]:
    """A convex quadrilateral ABCD with interior angles ``angles`` (summing to 360)."""
    a, b, _c, _d = (math.radians(t) for t in angles)
    # A at the origin, AB along +x; D along the ray at angle a from A; C closes the shape.
    ab, ad = 1.0, 0.8
    pb, pd = (ab, 0.0), (ad * math.cos(a), ad * math.sin(a))
    # C lies on the ray from B at direction pi - b; pick the point that makes angle D correct.
    dir_b = (math.cos(math.pi - b), math.sin(math.pi - b))
    dir_d = (math.cos(a - math.radians(180 - angles[3])), math.sin(a - math.radians(180 - angles[3])))
    det = dir_b[0] * (-dir_d[1]) - dir_b[1] * (-dir_d[0])
    if abs(det) < 1e-9:
        raise Redraw
    rx, ry = pd[0] - pb[0], pd[1] - pb[1]
    t = (ry * dir_d[0] - rx * dir_d[1]) / det
    s = (dir_b[0] * ry - dir_b[1] * rx) / det
    pc = (pb[0] + t * dir_b[0], pb[1] + t * dir_b[1])
    if t <= 0.05 or s <= 0.05:
        raise Redraw
    return {"A": (0.0, 0.0), "B": pb, "C": pc, "D": pd}


def angles(rng: np.random.Generator) -> Draft:
    """Linear pairs, vertical angles and complementary angles with expressions in x."""
    variant = pick(rng, ["linear_pair", "vertical", "complementary"])
    k1, k2 = randint(rng, 1, 5), randint(rng, 1, 5)
    c1, c2 = randint(rng, -20, 40), randint(rng, -20, 40)
    total = {"linear_pair": 180, "complementary": 90}.get(variant)
    if total is None:
        if k1 == k2:
            raise Redraw
        x = Fraction(c2 - c1, k1 - k2)
    else:
        x = Fraction(total - c1 - c2, k1 + k2)
    first, second = k1 * x + c1, k2 * x + c2
    if x <= 0 or min(first, second) < 10 or (variant == "vertical" and not 20 <= first <= 160):
        raise Redraw
    t = float(first)
    fig = Figure(points={"O": (0.0, 0.0), "A": polar((0, 0), 1, 0), "B": polar((0, 0), 1, t)})
    if variant == "vertical":
        fig.points |= {"C": polar((0, 0), 1, 180), "D": polar((0, 0), 1, 180 + t)}
        fig.seg("A", "C")
        fig.seg("B", "D")
        fig.angle("O", "A", "B", angle_term(k1, c1))
        fig.angle("O", "C", "D", angle_term(k2, c2))
    else:
        fig.points["C"] = polar((0, 0), 1, total)
        fig.seg("O", "B")
        if variant == "linear_pair":
            fig.seg("A", "C")
        else:
            fig.seg("O", "A")
            fig.seg("O", "C")
            fig.angle("O", "A", "C", right=True)
        fig.angle("O", "A", "B", angle_term(k1, c1))
        fig.angle("O", "B", "C", angle_term(k2, c2))
    note, answer = exact_or_rounded(rng, x)
    first_term, second_term = angle_term(k1, c1), angle_term(k2, c2)
    solution = {
        "linear_pair": f"The two angles form a straight line: {first_term} + {second_term} = 180°.",
        "vertical": f"Vertical angles are equal: {first_term} = {second_term}.",
        "complementary": f"The two angles make a right angle: {first_term} + {second_term} = 90°.",
    }[variant]
    return Draft(f"Find x.{note}", answer, fig, solution)
