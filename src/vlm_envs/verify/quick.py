"""Verdicts that need no parser: answers that cannot be graded, and two plain decimal numbers.

String work and exact fractions only, on text the normaliser has already capped in length, so
:func:`vlm_envs.verify.grade` gives these verdicts in the caller's process at once, without waiting for
a worker; :func:`vlm_envs.verify.grade_local` applies the same rules before it parses anything.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

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

#: Values closer than 10^-EXACT_DIGITS (relative) are equal.
EXACT_DIGITS = 40


def normalized(prediction: str, ground_truth: str) -> tuple[Answer, Answer]:
    """Both sides normalised (the label's normal form is cached: labels repeat)."""
    return normalize_answer(prediction), _normalize_truth(ground_truth)


@lru_cache(maxsize=4096)
def _normalize_truth(text: str) -> Answer:
    return normalize_answer(text)


def quick_verdict(pred: Answer, truth: Answer) -> Verdict | None:
    """The verdict when no parsing is needed to reach it, else None."""

    def verdict(correct: bool, reason: str) -> Verdict:
        return Verdict(correct, reason, pred.text or None, truth.text or None)

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
    if pred.decimals is not None and truth.decimals is not None:
        pred_value, truth_value = Fraction(pred.text), Fraction(truth.text)
        return verdict(*rounding_verdict(pred_value, pred.decimals, truth_value, truth.decimals))
    return None


def rounding_verdict(
    pred_value: Any, pred_decimals: int | None, truth_value: Any, truth_decimals: int | None
) -> tuple[bool, str]:
    """The rounding rules on two real values (exact fractions or sympy numbers alike).

    Equal within 10^-EXACT_DIGITS relative: equal. Otherwise a decimal label with d decimals matches
    iff |pred - truth| <= 0.5 * 10^-d; an exact label matches a prediction with d_p >= 1 decimals iff
    |pred - truth| <= 0.5 * 10^-d_p; anything else is a mismatch.
    """
    diff = abs(pred_value - truth_value)
    if diff * 10**EXACT_DIGITS <= max(1, abs(truth_value)):
        return True, EQUAL
    decimals = truth_decimals or pred_decimals
    if not decimals:
        return False, MISMATCH
    ok = bool(2 * diff * 10**decimals <= 1)
    return ok, ROUNDED_MATCH if ok else MISMATCH


def _angle_units_clash(pred: Answer, truth: Answer) -> bool:
    """Radians are not degrees: explicit opposite marks, or degrees against a label written with pi."""
    units = {pred.angle_unit, truth.angle_unit}
    if units == {"deg", "rad"}:
        return True
    return pred.angle_unit == "deg" and r"\pi" in truth.text and truth.angle_unit != "deg"
