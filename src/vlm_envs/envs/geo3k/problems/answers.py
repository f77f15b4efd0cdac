"""Exact answers written the way geo3k writes them: integers, fractions, surds, multiples of pi, decimals."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

Number = int | Fraction

#: How a problem states the precision it wants, by number of decimal places.
PRECISION_WORDS = {0: "the nearest whole number", 1: "the nearest tenth", 2: "the nearest hundredth"}


def simplify_radical(radicand: int) -> tuple[int, int]:
    """``sqrt(radicand) == k * sqrt(m)`` with ``m`` square-free: returns ``(k, m)``."""
    if radicand < 0:
        raise ValueError("radicand must be non-negative")
    k, m = 1, radicand
    d = 2
    while d * d <= m:
        while m % (d * d) == 0:
            m //= d * d
            k *= d
        d += 1
    return k, m


def frac_latex(q: Number) -> str:
    """``3``, ``\\frac{5}{2}``, ``-\\frac{1}{3}``."""
    q = Fraction(q)
    if q.denominator == 1:
        return str(q.numerator)
    sign = "-" if q < 0 else ""
    return f"{sign}\\frac{{{abs(q.numerator)}}}{{{q.denominator}}}"


def _times(coef: Fraction, symbol: str) -> str:
    """``coef * symbol`` in LaTeX with the symbol in the numerator: ``\\frac{3\\sqrt{2}}{2}``."""
    if coef == 0:
        return "0"
    sign = "-" if coef < 0 else ""
    num = abs(coef.numerator)
    top = symbol if num == 1 else f"{num}{symbol}"
    if coef.denominator == 1:
        return f"{sign}{top}"
    return f"{sign}\\frac{{{top}}}{{{coef.denominator}}}"


def surd_latex(coef: Number, radicand: int) -> str:
    """``coef * sqrt(radicand)`` in simplest radical form: ``4\\sqrt{3}``, ``\\frac{\\sqrt{2}}{2}``."""
    k, m = simplify_radical(radicand)
    c = Fraction(coef) * k
    if m == 0 or c == 0:
        return "0"
    return frac_latex(c) if m == 1 else _times(c, f"\\sqrt{{{m}}}")


def pi_latex(coef: Number) -> str:
    """``coef * pi``: ``16\\pi``, ``\\frac{9\\pi}{2}``, ``\\pi``."""
    return _times(Fraction(coef), "\\pi")


def surd_value(coef: Number, radicand: int) -> float:
    """The float value of ``coef * sqrt(radicand)``."""
    return float(coef) * math.sqrt(radicand)


def surd_text(coef: Number, radicand: int) -> str:
    """A diagram label for ``coef * sqrt(radicand)``: ``3√2``, ``√5``, ``7``."""
    k, m = simplify_radical(radicand)
    c = Fraction(coef) * k
    if m == 1:
        return decimal_text(c)
    head = "" if c == 1 else decimal_text(c)
    return f"{head}√{m}"


def decimal_text(value: Number) -> str:
    """A short label for an exact number: ``12``, ``7.5``, ``10/3`` when it has no short decimal."""
    q = Fraction(value)
    if q.denominator == 1:
        return str(q.numerator)
    for places in (1, 2):
        if (q * 10**places).denominator == 1:
            return format(Decimal(q.numerator) / Decimal(q.denominator), f".{places}f")
    return f"{q.numerator}/{q.denominator}"


def rounded(value: Number | float, places: int) -> str:
    """``value`` rounded half-up to ``places`` decimals, without trailing zeros: ``12``, ``8.5``, ``3.14``.

    Exact inputs (int, Fraction) round exactly; floats round from their shortest repr.
    """
    if isinstance(value, int | Fraction):
        q = Fraction(value)
        dec = Decimal(q.numerator) / Decimal(q.denominator)
    else:
        dec = Decimal(repr(float(value)))
    out = dec.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    if out == out.to_integral_value():
        return str(int(out))
    return format(out.normalize(), "f")


def near_rounding_tie(value: float, places: int, tol: float = 1e-6) -> bool:
    """Whether a float lies so close to a half-way point that float error could flip its rounding."""
    scaled = value * 10**places
    return abs(scaled - math.floor(scaled) - 0.5) < tol
