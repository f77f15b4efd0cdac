"""The procedural generator: seeded, exact answers in geo3k's forms, diagrams that agree with the answers."""

import hashlib
import math
import re
from fractions import Fraction

import numpy as np
import pytest

from vlm_envs.envs.geo3k.diagrams import Figure, check_image_size, render
from vlm_envs.envs.geo3k.problems import KINDS, check_kinds, generate_problem
from vlm_envs.envs.geo3k.problems.answers import (
    decimal_text,
    frac_latex,
    near_rounding_tie,
    pi_latex,
    rounded,
    simplify_radical,
    surd_latex,
    surd_text,
)
from vlm_envs.envs.geo3k.problems.base import Redraw
from vlm_envs.verify import grade_local


def digest(problem) -> str:
    return hashlib.sha256(b"".join(im.tobytes() for im in problem.images)).hexdigest()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((1, 8), "2\\sqrt{2}"),
        ((1, 49), "7"),
        ((3, 12), "6\\sqrt{3}"),
        ((Fraction(1, 2), 2), "\\frac{\\sqrt{2}}{2}"),
        ((Fraction(3, 2), 5), "\\frac{3\\sqrt{5}}{2}"),
        ((1, 1), "1"),
        ((2, 0), "0"),
    ],
)
def test_surds_in_simplest_radical_form(value, expected):
    assert surd_latex(*value) == expected


def test_exact_forms():
    assert simplify_radical(72) == (6, 2)
    assert frac_latex(Fraction(10, 4)) == "\\frac{5}{2}"
    assert frac_latex(Fraction(-1, 3)) == "-\\frac{1}{3}"
    assert frac_latex(6) == "6"
    assert pi_latex(16) == "16\\pi"
    assert pi_latex(Fraction(9, 2)) == "\\frac{9\\pi}{2}"
    assert pi_latex(1) == "\\pi"
    assert pi_latex(Fraction(1, 3)) == "\\frac{\\pi}{3}"
    assert surd_text(3, 8) == "6√2"
    assert surd_text(1, 5) == "√5"
    assert decimal_text(Fraction(15, 2)) == "7.5"
    assert decimal_text(Fraction(10, 3)) == "10/3"


def test_rounding_is_half_up_and_exact_for_rationals():
    assert rounded(Fraction(45, 2), 0) == "23"  # banker's rounding would give 22
    assert rounded(Fraction(2345, 1000), 2) == "2.35"
    assert rounded(2.675, 2) == "2.68"  # float 2.675 is 2.67499999...; rounding uses its repr
    assert rounded(math.pi * 16, 1) == "50.3"
    assert rounded(Fraction(17, 2), 2) == "8.5"
    assert rounded(12.0001, 1) == "12"
    assert near_rounding_tie(2.35, 1) and not near_rounding_tie(2.34, 1)


def test_same_seed_same_problem_and_image_bytes():
    a, b = generate_problem(11), generate_problem(11)
    assert (a.text, a.answer, a.kind, a.id) == (b.text, b.answer, b.kind, b.id)
    assert digest(a) == digest(b)
    assert generate_problem(-3).answer == generate_problem(-3).answer


def test_seeds_give_varied_problems_of_every_kind():
    problems = [generate_problem(seed) for seed in range(120)]
    assert {p.kind for p in problems} == set(KINDS)
    assert len({(p.text, p.answer) for p in problems}) > 100
    assert len({digest(p) for p in problems}) > 110  # area and circumference of one circle share a picture
    forms = {
        "integer": r"^\d+$",
        "decimal": r"^\d+\.\d+$",
        "surd": r"\\sqrt",
        "fraction": r"^\\frac\{\d+\}\{\d+\}$",
        "pi": r"\\pi",
    }
    for name, pattern in forms.items():
        assert any(re.search(pattern, p.answer) for p in problems), f"no {name} answer in 120 seeds"


def test_each_problem_has_one_image_placeholder_and_a_square_image():
    for seed in range(30):
        p = generate_problem(seed, image_size=224)
        assert p.text.count("<image>") == len(p.images) == 1
        assert p.images[0].size == (224, 224) and p.images[0].mode == "RGB"


def test_kind_and_size_validation():
    assert {generate_problem(s, kinds=["circle"]).kind for s in range(10)} == {"circle"}
    assert check_kinds("angle") == ("angle",)
    with pytest.raises(ValueError, match="unknown problem kind"):
        check_kinds(["hexagons"])
    for bad in (300, 0, 56, "336"):
        with pytest.raises(ValueError, match="multiple of 28"):
            check_image_size(bad)


def test_every_generated_answer_is_gradable_against_itself():
    for seed in range(60):
        p = generate_problem(seed)
        verdict = grade_local(p.answer, p.answer)
        assert verdict.correct, (p.text, p.answer, verdict)


# -- the diagrams agree with the answers ------------------------------------------------------------


def answer_value(answer: str) -> float:
    """The value of an answer in the generator's forms (integer, decimal, fraction, surd, pi)."""
    frac = re.fullmatch(r"\\frac\{(.+)\}\{(\d+)\}", answer)
    if frac:
        return answer_value(frac.group(1)) / int(frac.group(2))
    surd = re.fullmatch(r"(\d*)\\sqrt\{(\d+)\}", answer)
    if surd:
        return int(surd.group(1) or 1) * math.sqrt(int(surd.group(2)))
    pi = re.fullmatch(r"(\d*)\\pi", answer)
    if pi:
        return int(pi.group(1) or 1) * math.pi
    return float(answer)


def angle_at(fig: Figure, vertex: str, a: str, b: str) -> float:
    v, p, q = fig.points[vertex], fig.points[a], fig.points[b]
    t = math.atan2(q[1] - v[1], q[0] - v[0]) - math.atan2(p[1] - v[1], p[0] - v[0])
    d = math.degrees(t) % 360
    return min(d, 360 - d)


def tolerance(text: str) -> float:
    """Half a unit of the precision the problem asks for (exact answers: float noise only)."""
    for words, tol in (("nearest tenth", 0.05), ("nearest hundredth", 0.005), ("nearest whole", 0.5)):
        if words in text:
            return tol + 1e-9
    return 1e-6


def check_figure(fig: Figure, answer: str, text: str) -> int:
    """Assert every quantity the figure labels with x matches ``answer``; returns how many it checked."""
    x, tol = answer_value(answer), tolerance(text)
    checked = 0
    lengths = {s.label: math.dist(fig.points[s.a], fig.points[s.b]) for s in fig.segments if s.label}
    numeric = [(float(lbl), d) for lbl, d in lengths.items() if re.fullmatch(r"\d+(\.\d+)?", lbl)]
    if "x" in lengths and numeric:
        scale = numeric[0][1] / numeric[0][0]
        assert lengths["x"] / scale == pytest.approx(x, abs=tol + 1e-6 * x)
        checked += 1
    for mark in fig.angles:
        term = re.fullmatch(r"\(?(\d*)x([+-]\d+)?\)?°", mark.label or "")
        if term:
            k, c = int(term.group(1) or 1), int(term.group(2) or 0)
            measured = angle_at(fig, mark.vertex, mark.a, mark.b)
            assert measured == pytest.approx(k * x + c, abs=k * tol + 1e-6), mark
            checked += 1
    return checked


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_diagrams_are_drawn_to_agree_with_the_answer(kind):
    checked = 0
    for seed in range(80):
        try:
            draft = KINDS[kind](np.random.default_rng([seed, 0]))
        except Redraw:
            continue
        checked += check_figure(draft.figure, draft.answer, draft.text)
        render(draft.figure, 112)  # every figure renders
    assert kind == "circle" or checked >= 20


def test_angle_labels_name_true_angles():
    for seed in range(40):
        try:
            draft = KINDS["triangle"](np.random.default_rng([seed, 1]))
        except Redraw:
            continue
        for mark in draft.figure.angles:
            const = re.fullmatch(r"(\d+)°", mark.label or "")
            if const:
                assert angle_at(draft.figure, mark.vertex, mark.a, mark.b) == pytest.approx(
                    int(const.group(1))
                )
