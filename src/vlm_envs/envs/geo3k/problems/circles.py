"""Generated problems about circles: area, circumference, arcs, sectors, inscribed angles."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from vlm_envs.envs.geo3k.diagrams import Circle, Figure
from vlm_envs.envs.geo3k.problems.answers import PRECISION_WORDS, near_rounding_tie, pi_latex, rounded
from vlm_envs.envs.geo3k.problems.base import Draft, Redraw, pick, polar, randint

IN_TERMS_OF_PI = "Express your answer in terms of π."


def _pi_answer(rng: np.random.Generator, coef: Fraction) -> tuple[str, str]:
    """An instruction and the answer for ``coef * pi``: exact in terms of pi, or rounded."""
    if rng.random() < 0.5:
        return IN_TERMS_OF_PI, pi_latex(coef)
    places = int(rng.integers(1, 3))
    value = float(coef) * math.pi
    if near_rounding_tie(value, places):
        raise Redraw
    return f"Round to {PRECISION_WORDS[places]}.", rounded(value, places)


def circle(rng: np.random.Generator) -> Draft:
    """Area, circumference, arc length, sector area (exact in pi or rounded), inscribed angles."""
    variant = pick(rng, ["area", "circumference", "arc", "sector", "inscribed"])
    fig = Figure(points={"O": (0.0, 0.0)})
    r = randint(rng, 2, 20)
    fig.circles.append(Circle("O", float(r)))
    if variant in ("area", "circumference"):
        by_diameter = bool(rng.random() < 0.4)
        if by_diameter:
            fig.points["_P"], fig.points["_Q"] = polar((0, 0), r, 200), polar((0, 0), r, 20)
            fig.seg("_P", "_Q", str(2 * r))
        else:
            fig.points["_P"] = polar((0, 0), r, 30)
            fig.seg("O", "_P", str(r))
        coef = Fraction(r * r) if variant == "area" else Fraction(2 * r)
        note, answer = _pi_answer(rng, coef)
        radius = f"The diameter is {2 * r}, so the radius is {r}" if by_diameter else f"The radius is {r}"
        formula = f"π · {r}² = {r * r}π" if variant == "area" else f"2π · {r} = {2 * r}π"
        solution = f"{radius}; the {variant} is {formula}."
        return Draft(f"Find the {variant} of the circle. {note}", answer, fig, solution)
    if variant == "inscribed":
        arc = 2 * randint(rng, 20, 80)
        start = float(rng.uniform(-60, 0))
        fig.points["A"], fig.points["B"] = polar((0, 0), r, start), polar((0, 0), r, start + arc)
        fig.points["C"] = polar((0, 0), r, start + arc + (360 - arc) / 2 + float(rng.uniform(-30, 30)))
        fig.seg("C", "A")
        fig.seg("C", "B")
        fig.angle("C", "A", "B", "x°")
        mid = polar((0, 0), r * 1.12, start + arc / 2)
        fig.free_labels.append((mid, f"{arc}°"))
        solution = f"An inscribed angle is half the arc it intercepts: x = {arc} / 2."
        return Draft(f"Find x. The arc AB not containing C measures {arc}°.", str(arc // 2), fig, solution)
    theta = 5 * randint(rng, 4, 62)
    if theta == 180:
        raise Redraw
    fig.points["A"], fig.points["B"] = polar((0, 0), r, 0), polar((0, 0), r, theta)
    fig.seg("O", "A", str(r))
    fig.seg("O", "B")
    if theta < 180:
        fig.angle("O", "A", "B", f"{theta}°")
    else:
        fig.free_labels.append((polar((0, 0), r * 0.35, theta / 2), f"{theta}°"))
    if variant == "arc":
        note, answer = _pi_answer(rng, Fraction(theta, 360) * 2 * r)
        solution = f"The arc is {theta}/360 of the circumference: {theta}/360 · 2π · {r}."
        return Draft(f"Find the length of arc AB (the arc of {theta}°). {note}", answer, fig, solution)
    note, answer = _pi_answer(rng, Fraction(theta, 360) * r * r)
    solution = f"The sector is {theta}/360 of the disc: {theta}/360 · π · {r}²."
    return Draft(f"Find the area of sector AOB (central angle {theta}°). {note}", answer, fig, solution)
