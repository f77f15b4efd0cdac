"""In-process grading: normalise both sides, parse LaTeX with math-verify, compare with the rounding rules.

The rounding rules (geo3k labels are choice values, sometimes rounded) and the verdicts reached
without parsing are in :mod:`vlm_envs.verify.quick`.
Nothing here is bounded in time: :func:`vlm_envs.verify.grade` runs it in a killable worker.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import sympy
from math_verify import LatexExtractionConfig, parse, verify

from vlm_envs.verify.normalize import Answer
from vlm_envs.verify.quick import normalized, quick_verdict, rounding_verdict
from vlm_envs.verify.verdict import EQUAL, HEDGE, MISMATCH, UNPARSEABLE, Verdict

#: Digits carried when evaluating exact values.
_PRECISION = 60
_LATEX_ONLY = (LatexExtractionConfig(boxed_match_priority=0),)


def grade_local(prediction: str, ground_truth: str) -> Verdict:
    """Grade ``prediction`` against ``ground_truth`` in this process, with no time bound.

    Safe to call on hostile text in the sense that no text is evaluated as code; it may be slow
    on adversarial LaTeX, so production callers use :func:`vlm_envs.verify.grade`.
    """
    if not isinstance(prediction, str) or not isinstance(ground_truth, str):
        return Verdict(False, UNPARSEABLE)
    pred, truth = normalized(prediction, ground_truth)
    quick = quick_verdict(pred, truth)
    if quick is not None:
        return quick

    def verdict(correct: bool, reason: str) -> Verdict:
        return Verdict(correct, reason, pred.text or None, truth.text or None)

    pred_expr, truth_expr = _parse(pred.text), _parse(truth.text)
    if pred_expr is None or truth_expr is None:
        return verdict(False, UNPARSEABLE)
    if isinstance(pred_expr, sympy.Set) and not isinstance(truth_expr, sympy.Set):
        return verdict(False, HEDGE)
    return verdict(*_compare(pred, pred_expr, truth, truth_expr))


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
    return rounding_verdict(pred_value, pred.decimals, truth_value, truth.decimals)


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


#: Answer shapes the warm-up grades: the parser (ANTLR) builds its prediction tables on first sight of
#: each shape (up to 0.7 s), so the zygote sees them once and every forked worker inherits the tables.
_WARM_UP_PAIRS = (
    (r"\boxed{3\sqrt{2}}", "4.24"),
    (r"\frac{\pi}{3}", "60"),
    (r"\frac{80\pi}{3}", r"\frac{80\pi}{3}"),
    (r"12\pi", "37.7"),
    (r"\frac{7}{4}", "1.75"),
    (r"\sqrt{13}", r"\sqrt{13}"),
    (r"\frac{5\sqrt{3}}{2}", "4.33"),
    (r"2\sqrt{3} + \frac{1}{2}", "3.96"),
    (r"-\frac{5}{2}", "-2.5"),
    (r"10 \times 3 - 2 \cdot 4", "22"),
    (r"2^{3}", "8"),
    (r"x^{2} + 1", r"x^2+1"),
    (r"(1, 2)", r"(1, 2)"),
)


def warm_up() -> None:
    """Import and exercise the parser on common answer shapes, so a worker answers its first request
    quickly (see ``_WARM_UP_PAIRS``)."""
    for prediction, truth in _WARM_UP_PAIRS:
        grade_local(prediction, truth)


def grade_local_dict(prediction: str, ground_truth: str) -> dict[str, object]:
    """:func:`grade_local` as a JSON-able dict (what a pool worker sends back)."""
    return grade_local(prediction, ground_truth).to_dict()
