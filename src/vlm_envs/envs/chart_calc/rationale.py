"""ChartCalc's oracle rationale: which values the chart shows for the question and the arithmetic on them.

Values are named as the chart labels them (``Apples in 2024 = 57 kg``); the arithmetic is the question's
own ``calc`` expression, evaluated by the env's calculator.
"""

from __future__ import annotations

from fractions import Fraction

from vlm_envs.envs.chart_calc.calc import evaluate, format_value
from vlm_envs.envs.chart_calc.generator import ChartTable, Question

_RELATIONS = {
    "difference": "the first minus the second",
    "ratio": "the first divided by the second",
    "sum": "their sum",
    "percent_change": "the change over the earlier value, times 100",
}


def explain(table: ChartTable, question: Question, computing: bool) -> str:
    """Why the oracle calls ``calc`` now (``computing``) or answers."""
    if question.kind == "which" and len(table.series) > 1:
        return _largest_gap(table, question, computing)
    listing = "From the chart: " + ", ".join(_value(table, s, c) for s, c in question.reads) + "."
    if question.kind == "which":
        return _nearest_mean(table, question, listing, computing)
    relation = _RELATIONS.get(question.kind, f"their sum divided by {len(question.reads)}")
    if computing:
        return f"{listing} The answer is {relation}, so I compute it with calc."
    value = format_value(evaluate(question.expression))
    rounded = "" if value == question.answer else ", rounded as asked,"
    return f"{listing} {question.expression} = {value}, so the answer{rounded} is {question.answer}."


def _largest_gap(table: ChartTable, question: Question, computing: bool) -> str:
    """The category whose value in one series minus its value in another is largest."""
    (s, _), (t, _) = question.reads[:2]
    gaps = [(c, table.values[s][c], table.values[t][c]) for _, c in question.reads[::2]]
    head = f"For each category, its {table.series[s]} value minus its {table.series[t]} value: "
    if computing:
        listing = ", ".join(f"{table.categories[c]} {a} - {b}" for c, a, b in gaps)
        return f"{head}{listing}. The answer is the category with the largest; I find it with calc."
    listing = ", ".join(f"{table.categories[c]} {a} - {b} = {a - b}" for c, a, b in gaps)
    return f"{head}{listing}. The largest is {question.answer}'s."


def _nearest_mean(table: ChartTable, question: Question, listing: str, computing: bool) -> str:
    """The category whose value is closest to the mean of all of them."""
    if computing:
        return f"{listing} The answer is the category closest to their mean, so I compute the mean with calc."
    row = table.values[0]
    mean = Fraction(sum(row), len(row))
    best = table.categories.index(question.answer)
    gap = format_value(float(abs(row[best] - mean)))
    return (
        f"{listing} Their mean is {format_value(evaluate(question.expression))}; "
        f"{question.answer} ({row[best]}) is closest to it, {gap} away."
    )


def _value(table: ChartTable, s: int, c: int) -> str:
    """``Apples in 2024 = 57 kg`` (the series only where the chart has several)."""
    series = f" in {table.series[s]}" if table.series[s] else ""
    unit = "%" if table.unit == "%" else f" {table.unit}"
    return f"{table.categories[c]}{series} = {table.values[s][c]}{unit}"
