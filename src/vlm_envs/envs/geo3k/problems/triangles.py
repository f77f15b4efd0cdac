"""Generated problems about triangles: right triangles, general triangles, similar figures."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from vlm_envs.envs.geo3k.diagrams import Figure
from vlm_envs.envs.geo3k.problems.answers import (
    PRECISION_WORDS,
    decimal_text,
    frac_latex,
    near_rounding_tie,
    rounded,
    surd_latex,
    surd_text,
)
from vlm_envs.envs.geo3k.problems.base import Draft, Redraw, pick, polar, randint

NAMES = [("A", "B", "C"), ("J", "K", "L"), ("P", "Q", "R"), ("D", "E", "F"), ("M", "N", "O"), ("R", "S", "T")]
RADICAL = "Express your answer in simplest radical form."


def _to_tenth(value: float) -> str:
    if near_rounding_tie(value, 1):
        raise Redraw
    return rounded(value, 1)


def exact_or_rounded(rng: np.random.Generator, value: Fraction) -> tuple[str, str]:
    """An instruction and the answer for a rational result: as it is, a fraction, or to a tenth."""
    value = Fraction(value)
    if value.denominator == 1 or (value * 10).denominator == 1:
        return "", decimal_text(value)
    if rng.random() < 0.5:
        return " Write your answer as a fraction in simplest form.", frac_latex(value)
    return f" Round to {PRECISION_WORDS[1]}.", rounded(value, 1)


def right_triangle(rng: np.random.Generator) -> Draft:
    """Pythagorean theorem, 30-60-90 and 45-45-90 triangles, and trigonometry."""
    a_name, b_name, c_name = pick(rng, NAMES)
    variant = pick(rng, ["hypotenuse", "leg", "trig", "special"])
    fig = Figure()
    if variant == "trig":
        theta, hyp = randint(rng, 22, 68), randint(rng, 5, 24)
        legs = (hyp * math.cos(math.radians(theta)), hyp * math.sin(math.radians(theta)))
        fig.points = {c_name: (0.0, 0.0), b_name: (legs[0], 0.0), a_name: (0.0, legs[1])}
        asks_opposite = bool(rng.random() < 0.5)
        fig.polygon(
            [c_name, b_name, a_name],
            [None if asks_opposite else "x", str(hyp), "x" if asks_opposite else None],
        )
        fig.angle(b_name, c_name, a_name, f"{theta}°")
        fig.angle(c_name, b_name, a_name, right=True)
        answer = _to_tenth(legs[1] if asks_opposite else legs[0])
        side, ratio = ("opposite", "sin") if asks_opposite else ("adjacent to", "cos")
        solution = (
            f"The right angle is at {c_name}, so {b_name}{a_name} = {hyp} is the hypotenuse and x is the leg "
            f"{side} the {theta}° angle at {b_name}: x = {hyp} · {ratio} {theta}°."
        )
        return Draft(f"Find x. Round to {PRECISION_WORDS[1]}.", answer, fig, solution)
    if variant == "special":
        s = randint(rng, 2, 12)
        if rng.random() < 0.5:  # 30-60-90: short leg s, long leg s*sqrt(3), hypotenuse 2s
            fig.points = {c_name: (0.0, 0.0), b_name: (s * math.sqrt(3), 0.0), a_name: (0.0, float(s))}
            fig.angle(b_name, c_name, a_name, "30°")
            given, asked = pick(rng, [("short", "long"), ("short", "hyp"), ("hyp", "long"), ("hyp", "short")])
            values = {
                "short": (str(s), str(s)),
                "long": (surd_text(s, 3), surd_latex(s, 3)),
                "hyp": (str(2 * s),) * 2,
            }
            labels = {"long": None, "hyp": None, "short": None}
            labels[given], labels[asked] = values[given][0], "x"
            fig.polygon([c_name, b_name, a_name], [labels["long"], labels["hyp"], labels["short"]])
            answer = values[asked][1]
            side = {"short": "short leg", "long": "long leg", "hyp": "hypotenuse"}
            solution = (
                "A 30-60-90 triangle has sides s (opposite 30°), s√3 and 2s (the hypotenuse). "
                f"The {side[given]} is {values[given][0]}, so s = {s} and x, the {side[asked]}, "
                f"is {values[asked][0]}."
            )
        else:  # 45-45-90: legs s, hypotenuse s*sqrt(2)
            fig.points = {c_name: (0.0, 0.0), b_name: (float(s), 0.0), a_name: (0.0, float(s))}
            fig.angle(b_name, c_name, a_name, "45°")
            if rng.random() < 0.5:
                fig.polygon([c_name, b_name, a_name], [str(s), "x", None])
                answer = surd_latex(s, 2)
                solution = f"A 45-45-90 triangle has equal legs ({s}) and hypotenuse leg · √2: x = {s}√2."
            else:
                hyp = 2 * s
                fig.polygon([c_name, b_name, a_name], ["x", str(hyp), None])
                answer = surd_latex(Fraction(hyp, 2), 2)
                solution = f"A 45-45-90 triangle has legs of hypotenuse / √2: x = {hyp} / √2 = {s}√2."
        fig.angle(c_name, b_name, a_name, right=True)
        return Draft(f"Find x. {RADICAL}", answer, fig, solution)
    leg1 = randint(rng, 2, 15)
    if variant == "hypotenuse":
        leg2 = randint(rng, 2, 15)
        squared, labels = leg1 * leg1 + leg2 * leg2, [str(leg1), "x", str(leg2)]
        solution = (
            f"The right angle is at {c_name}, so x is the hypotenuse: x² = {leg1}² + {leg2}² = {squared}."
        )
    else:
        hyp = randint(rng, leg1 + 1, leg1 + 12)
        squared = hyp * hyp - leg1 * leg1
        leg2 = math.sqrt(squared)
        labels = [str(leg1), str(hyp), "x"]
        solution = (
            f"The right angle is at {c_name}, so {b_name}{a_name} = {hyp} is the hypotenuse and x a leg: "
            f"x² = {hyp}² - {leg1}² = {squared}."
        )
    fig.points = {c_name: (0.0, 0.0), b_name: (float(leg1), 0.0), a_name: (0.0, float(leg2))}
    fig.polygon([c_name, b_name, a_name], labels)
    fig.angle(c_name, b_name, a_name, right=True)
    exact = math.isqrt(squared) ** 2 == squared
    return Draft("Find x." if exact else f"Find x. {RADICAL}", surd_latex(1, squared), fig, solution)


def angle_term(k: int, c: int) -> str:
    """``(kx+c)°`` as a diagram label."""
    head = "x" if k == 1 else f"{k}x"
    return f"({head}{'+' if c > 0 else '-'}{abs(c)})°" if c else f"{head}°"


def _triangle_with_angles(names: tuple[str, str, str], a_deg: float, b_deg: float) -> Figure:
    """A triangle on a unit base whose angles at the first two points are ``a_deg`` and ``b_deg``."""
    c_deg = 180 - a_deg - b_deg
    side = math.sin(math.radians(b_deg)) / math.sin(math.radians(c_deg))
    fig = Figure()
    fig.points = {names[0]: (0.0, 0.0), names[1]: (1.0, 0.0), names[2]: polar((0.0, 0.0), side, a_deg)}
    fig.polygon(list(names))
    return fig


def triangle(rng: np.random.Generator) -> Draft:
    """Angle sums, the law of cosines, areas and isosceles triangles."""
    names = pick(rng, NAMES)
    a_name, b_name, c_name = names
    variant = pick(rng, ["angle_sum", "cosines", "area", "isosceles"])
    if variant == "angle_sum":
        k1, k2, x = randint(rng, 1, 4), randint(rng, 1, 3), randint(rng, 8, 40)
        c1, c2 = 5 * randint(rng, -4, 6), 5 * randint(rng, -4, 6)
        a_deg, b_deg = k1 * x + c1, k2 * x + c2
        c_deg = 180 - a_deg - b_deg
        if min(a_deg, b_deg, c_deg) < 20 or max(a_deg, b_deg, c_deg) > 130:
            raise Redraw
        fig = _triangle_with_angles(names, a_deg, b_deg)
        fig.angle(a_name, b_name, c_name, angle_term(k1, c1))
        fig.angle(b_name, c_name, a_name, angle_term(k2, c2))
        fig.angle(c_name, a_name, b_name, f"{c_deg}°")
        terms = f"{angle_term(k1, c1)} + {angle_term(k2, c2)} + {c_deg}°"
        solution = f"The angles of a triangle add up to 180°: {terms} = 180°."
        return Draft("Find x.", str(x), fig, solution)
    if variant == "isosceles":
        apex = randint(rng, 30, 120)
        fig = _triangle_with_angles(names, (180 - apex) / 2, (180 - apex) / 2)
        fig.segments.clear()
        fig.seg(a_name, b_name)
        fig.seg(b_name, c_name, ticks=1)
        fig.seg(c_name, a_name, ticks=1)
        fig.angle(c_name, a_name, b_name, f"{apex}°")
        fig.angle(a_name, b_name, c_name, "x°")
        solution = (
            f"The tick marks show {c_name}{a_name} = {c_name}{b_name}, so the base angles at {a_name} and "
            f"{b_name} are equal: x = (180 - {apex}) / 2."
        )
        return Draft("Find x.", decimal_text(Fraction(180 - apex, 2)), fig, solution)
    fig = Figure()
    if variant == "cosines":
        b, c, angle = randint(rng, 4, 15), randint(rng, 4, 15), randint(rng, 30, 140)
        fig.points = {a_name: (0.0, 0.0), b_name: (float(c), 0.0), c_name: polar((0.0, 0.0), b, angle)}
        fig.polygon([a_name, b_name, c_name], [str(c), "x", str(b)])
        fig.angle(a_name, b_name, c_name, f"{angle}°")
        value = math.sqrt(b * b + c * c - 2 * b * c * math.cos(math.radians(angle)))
        solution = (
            f"By the law of cosines at the {angle}° angle at {a_name}: "
            f"x² = {b}² + {c}² - 2 · {b} · {c} · cos {angle}°."
        )
        return Draft(f"Find x. Round to {PRECISION_WORDS[1]}.", _to_tenth(value), fig, solution)
    base, height = randint(rng, 4, 20), randint(rng, 3, 15)
    foot = base * float(rng.uniform(0.2, 0.8))
    fig.points = {
        a_name: (0.0, 0.0),
        b_name: (float(base), 0.0),
        c_name: (foot, float(height)),
        "_H": (foot, 0.0),
    }
    fig.polygon([a_name, b_name, c_name], [str(base), None, None])
    fig.seg(c_name, "_H", str(height), dashed=True)
    fig.angle("_H", b_name, c_name, right=True)
    solution = f"The area is half the base times the height: (1/2) · {base} · {height}."
    return Draft("Find the area of the triangle.", decimal_text(Fraction(base * height, 2)), fig, solution)


def similar(rng: np.random.Generator) -> Draft:
    """Similar triangles and the side-splitter theorem."""
    if rng.random() < 0.5:
        p, q = pick(rng, [(3, 2), (2, 3), (5, 2), (4, 3), (3, 4), (5, 3), (2, 1), (1, 2), (3, 1)])
        k = Fraction(p, q)
        c = q * randint(rng, 2, 6)
        a, b = randint(rng, 3, 12), randint(rng, 3, 12)
        if not (abs(a - b) < c < a + b):
            raise Redraw
        # ABC with AB = c, BC = a, CA = b; DEF is ABC scaled by k.
        angle_a = math.degrees(math.acos((b * b + c * c - a * a) / (2 * b * c)))
        big = (0.0, 0.0), (float(c), 0.0), polar((0.0, 0.0), b, angle_a)
        shift = c + 2.0
        fig = Figure()
        for name, (x, y) in zip("ABC", big, strict=True):
            fig.points[name] = (x, y)
        for name, (x, y) in zip("DEF", big, strict=True):
            fig.points[name] = (shift + float(k) * x, float(k) * y)
        fig.polygon(["A", "B", "C"], [str(c), str(a), None])
        fig.polygon(["D", "E", "F"], [decimal_text(k * c), "x", None])
        note, answer = exact_or_rounded(rng, k * a)
        solution = (
            f"Corresponding sides of similar triangles are proportional: EF / BC = DE / AB, "
            f"so x = {a} · {decimal_text(k * c)} / {c}."
        )
        return Draft(f"△ABC ∼ △DEF. Find x.{note}", answer, fig, solution)
    ad, db, ae = randint(rng, 2, 12), randint(rng, 2, 12), randint(rng, 2, 12)
    ratio = (ad + db) / ad
    apex, left = (0.0, 0.0), polar((0.0, 0.0), ad + db, 240)
    right_len = ae * ratio
    right = polar(apex, right_len, 300 + float(rng.uniform(-8, 8)))
    fig = Figure()
    fig.points = {
        "A": apex,
        "B": left,
        "C": right,
        "D": polar(apex, ad, 240),
        "E": (right[0] * ae / right_len, right[1] * ae / right_len),
    }
    fig.seg("A", "D", str(ad))
    fig.seg("D", "B", str(db))
    fig.seg("A", "E", str(ae))
    fig.seg("E", "C", "x")
    fig.seg("B", "C")
    fig.seg("D", "E")
    note, answer = exact_or_rounded(rng, Fraction(db * ae, ad))
    solution = f"Since DE ∥ BC, AE / EC = AD / DB: {ae} / x = {ad} / {db}, so x = {db} · {ae} / {ad}."
    return Draft(f"In the figure, DE ∥ BC. Find x.{note}", answer, fig, solution)
