"""In-process grading: normalise both sides, parse LaTeX with math-verify, compare with the rounding rules.

Rounding rules (geo3k labels are choice values, sometimes rounded):
- a decimal label with d decimals matches a prediction iff |pred - gt| <= 0.5 * 10^-d;
- an exact label (integer, fraction, surd, pi) matches a decimal prediction with d_p >= 1 decimals
  iff |pred - gt| <= 0.5 * 10^-d_p;
- otherwise the values must be equal.
Nothing here is bounded in time: :func:`vlm_envs.verify.grade` runs it in a killable worker.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import sympy
from math_verify import LatexExtractionConfig, parse, verify

from vlm_envs.verify.normalize import Answer, normalize_answer
from vlm_envs.verify.verdict import (
    CHOICE_LETTER,
    EMPTY,
    EQUAL,
    HEDGE,
    MISMATCH,
    ROUNDED_MATCH,
    TOO_LONG,
    UNIT_MISMATCH,
    UNPARSEABLE,
    Verdict,
)

#: Digits carried when evaluating exact values; values closer than 10^-EXACT_DIGITS (relative) are equal.
_PRECISION = 60
_EXACT_DIGITS = 40
_LATEX_ONLY = (LatexExtractionConfig(boxed_match_priority=0),)


def grade_local(prediction: str, ground_truth: str) -> Verdict:
    """Grade ``prediction`` against ``ground_truth`` in this process, with no time bound.

    Safe to call on hostile text in the sense that no text is evaluated as code; it may be slow
    on adversarial LaTeX, so production callers use :func:`vlm_envs.verify.grade`.
    """
    if not isinstance(prediction, str) or not isinstance(ground_truth, str):
        return Verdict(False, UNPARSEABLE)
    pred = normalize_answer(prediction)
    truth = _normalize_truth(ground_truth)
    shown_pred = pred.text or None
    shown_truth = truth.text or None

    def verdict(correct: bool, reason: str) -> Verdict:
        return Verdict(correct, reason, shown_pred, shown_truth)

    if pred.problem in (EMPTY, TOO_LONG):
        return verdict(False, pred.problem)
    if pred.hedge and not truth.hedge:
        return verdict(False, HEDGE)
    if pred.letter or truth.letter:
        if pred.letter and truth.letter:
            return verdict(pred.letter == truth.letter, EQUAL if pred.letter == truth.letter else MISMATCH)
        return verdict(False, CHOICE_LETTER if pred.letter else MISMATCH)
    if pred.problem is not None:
        return verdict(False, pred.problem)
    if truth.problem is not None:
        return verdict(False, UNPARSEABLE)
    if _angle_units_clash(pred, truth):
        return verdict(False, UNIT_MISMATCH)
    pred_expr, truth_expr = _parse(pred.text), _parse(truth.text)
    if pred_expr is None or truth_expr is None:
        return verdict(False, UNPARSEABLE)
    if isinstance(pred_expr, sympy.Set) and not isinstance(truth_expr, sympy.Set):
        return verdict(False, HEDGE)
    return verdict(*_compare(pred, pred_expr, truth, truth_expr))


@lru_cache(maxsize=4096)
def _normalize_truth(text: str) -> Answer:
    return normalize_answer(text)


def _angle_units_clash(pred: Answer, truth: Answer) -> bool:
    """Radians are not degrees: explicit opposite marks, or degrees against a label written with pi."""
    units = {pred.angle_unit, truth.angle_unit}
    if units == {"deg", "rad"}:
        return True
    return pred.angle_unit == "deg" and r"\pi" in truth.text and truth.angle_unit != "deg"


@lru_cache(maxsize=4096)
def _parse(latex: str) -> sympy.Basic | None:
    """Parse one normalised answer to sympy through math-verify's LaTeX path only (no ``parse_expr``)."""
    found = parse(
        "\\boxed{" + latex + "}",
        extraction_config=_LATEX_ONLY,
        fallback_mode="no_fallback",
        extraction_mode="first_match",
        parsing_timeout=None,
    )
    if not found or not isinstance(found[0], sympy.Basic):
        return None
    expr = found[0]
    # Floats in mixed expressions ("2.5\sqrt{2}") become the exact decimals they were written as.
    floats = {f: sympy.Rational(str(f)) for f in expr.atoms(sympy.Float)}
    return expr.xreplace(floats) if floats else expr


def _compare(
    pred: Answer, pred_expr: sympy.Basic, truth: Answer, truth_expr: sympy.Basic
) -> tuple[bool, str]:
    pred_value = _value(pred, pred_expr)
    truth_value = _value(truth, truth_expr)
    if pred_value is None or truth_value is None:
        ok = verify(truth_expr, pred_expr, timeout_seconds=None)
        return ok, EQUAL if ok else MISMATCH
    diff = abs(pred_value - truth_value)
    if diff <= sympy.Rational(1, 10**_EXACT_DIGITS) * max(1, abs(truth_value)):
        return True, EQUAL
    if truth.decimals:
        tolerance = sympy.Rational(1, 2 * 10**truth.decimals)
    elif pred.decimals:
        tolerance = sympy.Rational(1, 2 * 10**pred.decimals)
    else:
        return False, MISMATCH
    ok = bool(diff <= tolerance)
    return ok, ROUNDED_MATCH if ok else MISMATCH


def _value(answer: Answer, expr: sympy.Basic) -> sympy.Rational | sympy.Float | None:
    """A real number for ``expr`` (exact for literals, 60 digits otherwise), or None if it is not one."""
    if answer.decimals is not None:
        return sympy.Rational(answer.text.replace("+", ""))
    if not isinstance(expr, sympy.Expr) or expr.free_symbols or not expr.is_number:
        return None
    value = expr.evalf(_PRECISION)
    if not value.is_real or not value.is_finite:
        return None
    return value


# The worker disables math-verify's SIGALRM timeouts on purpose; its warning about that is noise.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def warm_up() -> None:
    """Import and exercise the parser once, so a fresh worker answers its first request quickly."""
    samples = ((r"\boxed{3\sqrt{2}}", "4.24"), (r"x = 52^\circ", "52"), (r"\frac{\pi}{3}", "60"))
    for prediction, truth in samples:
        grade_local(prediction, truth)


def grade_local_dict(prediction: str, ground_truth: str) -> dict[str, object]:
    """:func:`grade_local` as a JSON-able dict (what a pool worker sends back)."""
    return grade_local(prediction, ground_truth).to_dict()
