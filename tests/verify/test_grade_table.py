"""The grading table: (prediction, label, correct, reason) across the categories of the geo3k issue."""

from __future__ import annotations

import pytest

from vlm_envs.verify import (
    CHOICE_LETTER,
    EMPTY,
    EQUAL,
    HEDGE,
    MISMATCH,
    ROUNDED_MATCH,
    TOO_COMPLEX,
    TOO_LONG,
    UNIT_MISMATCH,
    UNPARSEABLE,
    grade,
    grade_local,
)

T, F = True, False

FORMATTING = [
    (r"\boxed{5}", "5", T, EQUAL),
    (r"The area is \boxed{24}.", "24", T, EQUAL),
    (r"First \boxed{3}, then correcting: \boxed{4}", "4", T, EQUAL),
    (r"\boxed{\boxed{7}}", "7", T, EQUAL),
    ("$12$", "12", T, EQUAL),
    (r"\(12\)", "12", T, EQUAL),
    (r"\[ 12 \]", "12", T, EQUAL),
    ("Answer: 12", "12", T, EQUAL),
    ("The answer is 12.", "12", T, EQUAL),
    ("Final answer: $x = 12$", "12", T, EQUAL),
    ("x = 5", "5", T, EQUAL),
    ("y=5", "5", T, EQUAL),
    ("AB = 13", "13", T, EQUAL),
    (r"m\angle C = 127", "127", T, EQUAL),
    (r"m \angle ABC = 35", "35", T, EQUAL),
    (r"\angle 2 = 64^\circ", "64", T, EQUAL),
    ("∠A = 30°", "30", T, EQUAL),
    (r"\boxed{x = 2\sqrt{3}}", r"2\sqrt{3}", T, EQUAL),
    ("5 cm", "5", T, EQUAL),
    (r"5 \text{ cm}", "5", T, EQUAL),
    (r"10 \text{ cm}^2", "10", T, EQUAL),
    ("12 in.", "12", T, EQUAL),
    ("7 ft", "7", T, EQUAL),
    ("9 m", "9", T, EQUAL),
    ("40 units", "40", T, EQUAL),
    ("84 square units", "84", T, EQUAL),
    (r"\mathrm{6\ mm}", "6", T, EQUAL),
    ("3 yards", "3", T, EQUAL),
    (r"127^\circ", "127", T, EQUAL),
    (r"127^{\circ}", "127", T, EQUAL),
    ("127°", "127", T, EQUAL),
    ("127 degrees", "127", T, EQUAL),
    (r"127\degree", "127", T, EQUAL),
    ("52", r"52^\circ", T, EQUAL),
    ("3√2", r"3\sqrt{2}", T, EQUAL),
    ("√(18)", r"3\sqrt{2}", T, EQUAL),
    ("√12", r"2\sqrt{3}", T, EQUAL),
    ("2 sqrt(3)", r"2\sqrt{3}", T, EQUAL),
    ("4π", r"4\pi", T, EQUAL),
    ("4 pi", r"4\pi", T, EQUAL),
    ("π/3", r"\frac{\pi}{3}", T, EQUAL),
    ("−3", "-3", T, EQUAL),
    ("–3", "-3", T, EQUAL),
    ("１２", "12", T, EQUAL),
    ("３．５", "3.5", T, EQUAL),
    ("12.", "12", T, EQUAL),
    ("1,200", "1200", T, EQUAL),
    ("12,345.5", "12345.5", T, EQUAL),
    ("1{,}200", "1200", T, EQUAL),
    ("5\u200b", "5", T, EQUAL),
    ("\u00a05 ", "5", T, EQUAL),
    (r"\left(5\right)", "5", T, EQUAL),
    ("+5", "5", T, EQUAL),
]

EQUIVALENCE = [
    (r"\frac{30}{4}", r"\frac{15}{2}", T, EQUAL),
    (r"\dfrac{30}{4}", r"\frac{15}{2}", T, EQUAL),
    ("30/4", r"\frac{15}{2}", T, EQUAL),
    ("7.5", r"\frac{15}{2}", T, EQUAL),
    (r"\frac{15}{2}", "7.5", T, EQUAL),
    (r"\sqrt{18}", r"3\sqrt{2}", T, EQUAL),
    (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", T, EQUAL),
    (r"\frac{6}{\sqrt{3}}", r"2\sqrt{3}", T, EQUAL),
    (r"2.5\sqrt{2}", r"\frac{5\sqrt{2}}{2}", T, EQUAL),
    (r"0.1\pi", r"\frac{\pi}{10}", T, EQUAL),
    ("52.0", "52", T, EQUAL),
    ("0.530", "0.53", T, EQUAL),
    ("x+1", "1+x", T, EQUAL),
    (r"\frac{31}{4}", r"\frac{15}{2}", F, MISMATCH),
    (r"3\sqrt{3}", r"3\sqrt{2}", F, MISMATCH),
    (r"2\pi", r"4\pi", F, MISMATCH),
    ("-3", "3", F, MISMATCH),
    ("4", r"3\sqrt{2}", F, MISMATCH),
    ("x+2", "x+1", F, MISMATCH),
]

ROUNDING = [
    ("4.24", r"3\sqrt{2}", T, ROUNDED_MATCH),
    ("4.243", r"3\sqrt{2}", T, ROUNDED_MATCH),
    ("4.2", r"3\sqrt{2}", T, ROUNDED_MATCH),
    ("4.25", r"3\sqrt{2}", F, MISMATCH),
    (r"3\sqrt{2}", "4.24", T, ROUNDED_MATCH),
    (r"\frac{8}{15}", "0.53", T, ROUNDED_MATCH),
    ("8/15", "0.53", T, ROUNDED_MATCH),
    ("0.5333", "0.53", T, ROUNDED_MATCH),
    ("0.534", "0.53", T, ROUNDED_MATCH),
    ("0.535", "0.53", T, ROUNDED_MATCH),
    ("0.5351", "0.53", F, MISMATCH),
    ("0.57", "0.53", F, MISMATCH),
    ("0.5", "0.53", F, MISMATCH),
    ("6.71", "6.7", T, ROUNDED_MATCH),
    ("6.75", "6.7", T, ROUNDED_MATCH),
    ("6.76", "6.7", F, MISMATCH),
    ("52.4", "52", F, MISMATCH),
    ("52.04", "52", F, MISMATCH),
    ("22.6", "22.63", F, MISMATCH),
    ("22.634", "22.63", T, ROUNDED_MATCH),
    ("0.53", r"\frac{8}{15}", T, ROUNDED_MATCH),
    ("0.5", r"\frac{8}{15}", T, ROUNDED_MATCH),
    ("0.54", r"\frac{8}{15}", F, MISMATCH),
    ("3.14", r"\pi", T, ROUNDED_MATCH),
    ("3.1416", r"\pi", T, ROUNDED_MATCH),
    ("3.15", r"\pi", F, MISMATCH),
    ("3", r"\pi", F, MISMATCH),
    ("21.99", r"7\pi", T, ROUNDED_MATCH),
    ("1.047", r"\frac{\pi}{3}", T, ROUNDED_MATCH),
    ("-4.24", r"-3\sqrt{2}", T, ROUNDED_MATCH),
    (r"4.24 \text{ cm}", r"3\sqrt{2}", T, ROUNDED_MATCH),
    (r"AB = 3\sqrt{2} \approx 4.24", r"3\sqrt{2}", T, ROUNDED_MATCH),
    ("1,234.5", "1234.46", F, MISMATCH),
    ("12.5", "12.45", F, MISMATCH),
]

REALISTIC = [
    (r"So the side is \boxed{8\sqrt{3}}.", "13.86", T, ROUNDED_MATCH),
    (r"\boxed{2 \sqrt{221}}", "29.73", T, ROUNDED_MATCH),
    (r"\boxed{\dfrac{5\sqrt{3}}{3}}", "2.89", T, ROUNDED_MATCH),
    (r"\boxed{16 \pi}", "50.27", T, ROUNDED_MATCH),
    (r"\boxed{120^{\circ}}", "120", T, EQUAL),
    (r"\boxed{\text{4.5 units}}", "4.5", T, EQUAL),
    (r"5 \mathrm{~cm}", "5", T, EQUAL),
    ("x = 5 cm", "5", T, EQUAL),
    ("12in", "12", T, EQUAL),
    ("5,", "5", T, EQUAL),
    (r"\boxed{-\frac{1}{2}}", "-0.5", T, EQUAL),
    ("-.5", "-0.5", T, EQUAL),
    (r"\sqrt[3]{8}", "2", T, EQUAL),
    (r"2 \times 3", "6", T, EQUAL),
    ("29.7", "29.73", F, MISMATCH),
    ("3,5", "3.5", F, HEDGE),
]

ANGLES = [
    (r"\frac{\pi}{3}", "60", F, MISMATCH),
    ("60°", r"\frac{\pi}{3}", F, UNIT_MISMATCH),
    ("60 degrees", r"\frac{\pi}{3} \text{ rad}", F, UNIT_MISMATCH),
    (r"\frac{\pi}{3} \text{ radians}", r"60^\circ", F, UNIT_MISMATCH),
    (r"\frac{\pi}{3} rad", r"\frac{\pi}{3}", T, EQUAL),
    ("1.05 rad", r"\frac{\pi}{3}", T, ROUNDED_MATCH),
]

REJECTED = [
    ("B", "12", F, CHOICE_LETTER),
    ("(B)", "12", F, CHOICE_LETTER),
    (r"\text{B}", "12", F, CHOICE_LETTER),
    ("Answer: C.", "12", F, CHOICE_LETTER),
    ("option D", "12", F, CHOICE_LETTER),
    ("B", "B", T, EQUAL),
    ("(b)", "12", F, MISMATCH),
    ("(B) 12", "12", T, EQUAL),
    ("52 or 53", "52", F, HEDGE),
    (r"52 \text{ or } 53", "52", F, HEDGE),
    ("52, 53", "52", F, HEDGE),
    (r"\boxed{52} or \boxed{53}", "52", F, HEDGE),
    (r"\pm 3", "3", F, HEDGE),
    ("±3", "3", F, HEDGE),
    ("x = 2, y = 3", "2", F, HEDGE),
    ("", "5", F, EMPTY),
    ("   ", "5", F, EMPTY),
    (r"\boxed{}", "5", F, EMPTY),
    ("$$", "5", F, EMPTY),
    ("The answer is", "5", F, EMPTY),
    ("3." + "1" * 1000, "3", F, TOO_LONG),
    ("x" * 30_000, "3", F, TOO_LONG),
    (r"9^{9^{9^{9}}}", "5", F, TOO_COMPLEX),
    ("9**9**9**9", "5", F, TOO_COMPLEX),
    ("{" * 20 + "5" + "}" * 20, "5", T, EQUAL),
    (r"\frac{1}{" * 12 + "2" + "}" * 12, "2", F, TOO_COMPLEX),
    ("(" * 12 + "5" + ")" * 12, "5", F, TOO_COMPLEX),
    ("five", "5", F, UNPARSEABLE),
    (r"\boxed{5", "5", F, UNPARSEABLE),
    ("5}", "5", F, UNPARSEABLE),
    ("I don't know", "5", F, UNPARSEABLE),
    ("60 rad°", "60", F, UNPARSEABLE),
]

TABLE = FORMATTING + EQUIVALENCE + ROUNDING + REALISTIC + ANGLES + REJECTED


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 100
    assert len({(p, g) for p, g, _, _ in TABLE}) == len(TABLE), "duplicate rows"


@pytest.mark.parametrize(("prediction", "label", "correct", "reason"), TABLE)
def test_grade_local(prediction: str, label: str, correct: bool, reason: str) -> None:
    verdict = grade_local(prediction, label)
    assert (verdict.correct, verdict.reason) == (correct, reason), verdict


def test_pool_agrees_with_local_on_the_whole_table() -> None:
    for prediction, label, correct, reason in TABLE:
        verdict = grade(prediction, label)
        assert (verdict.correct, verdict.reason) == (correct, reason), verdict
        assert verdict.prediction_parsed == grade_local(prediction, label).prediction_parsed
