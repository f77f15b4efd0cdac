"""Chart tables and questions drawn from a seed: every number a question needs is printed on the chart.

Values are whole numbers, so the value labels are exact; answers are computed with exact fractions and
rounded half up at the rounding the question states.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction

import numpy as np

from vlm_envs.envs.chart_calc.config import APPLICABLE, ChartCalcConfig, ChartKind, QuestionKind

_TOPICS = (
    (
        "Fruit sold per day",
        "kg",
        ("Apples", "Pears", "Plums", "Grapes", "Cherries", "Mangoes", "Lemons", "Figs"),
    ),
    (
        "Visitors per museum",
        "thousand",
        ("Louvre", "Prado", "Uffizi", "Tate", "Hermitage", "Rijks", "Met", "Orsay"),
    ),
    (
        "Books lent per branch",
        "books",
        ("North", "South", "East", "West", "Central", "Harbor", "Hill", "River"),
    ),
    (
        "Energy use per plant",
        "GWh",
        ("Alder", "Birch", "Cedar", "Maple", "Spruce", "Willow", "Hazel", "Rowan"),
    ),
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug")
_SERIES = ("2022", "2023", "2024", "2025")


@dataclass(frozen=True)
class ChartTable:
    """What a chart shows: ``values[s][c]`` is series ``s`` at category ``c``."""

    kind: ChartKind
    title: str
    unit: str
    categories: tuple[str, ...]
    series: tuple[str, ...]
    values: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Question:
    """A question, its exact answer as text, and the ``calc`` expression a reference player writes."""

    kind: QuestionKind
    text: str
    answer: str
    expression: str
    numeric: bool
    #: The chart's values the answer needs, as (series, category) indices into ``ChartTable.values``.
    reads: tuple[tuple[int, int], ...] = ()


def generate_table(config: ChartCalcConfig, rng: np.random.Generator) -> ChartTable:
    """A table for a chart kind drawn from ``config.kinds``."""
    kind: ChartKind = config.kinds[int(rng.integers(len(config.kinds)))]
    n = int(rng.integers(config.categories[0], config.categories[1] + 1))
    title, unit, pool = _TOPICS[int(rng.integers(len(_TOPICS)))]
    if kind == "line":
        start = int(rng.integers(0, len(_MONTHS) - n + 1))
        categories = _MONTHS[start : start + n]
        title = f"{title.split(' per ')[0]} per month"
    else:
        categories = tuple(pool[int(i)] for i in sorted(rng.choice(len(pool), n, replace=False)))
    if kind == "grouped_bar":
        k = int(rng.integers(config.series[0], config.series[1] + 1))
        series = _SERIES[len(_SERIES) - k :]
    else:
        series = ("",)
    if kind == "pie":
        cuts = np.sort(rng.choice(np.arange(1, 100), n - 1, replace=False))
        shares = np.diff(np.concatenate([[0], cuts, [100]]))
        while shares.min() < 4:  # slices thin enough to hide their label are widened from the largest
            shares[int(shares.argmin())] += 1
            shares[int(shares.argmax())] -= 1
        values = (tuple(int(v) for v in shares),)
        title, unit = title.split(" per ")[0] + ": share of the total", "%"
    else:
        values = tuple(tuple(int(v) for v in rng.integers(12, 100, n)) for _ in series)
    return ChartTable(kind, title, unit, tuple(categories), tuple(series), values)


def _rounded(value: Fraction, places: int) -> str:
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return str(exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def _rule(places: int) -> str:
    if places == 0:
        return "Give a whole number."
    return f"Round to {places} decimal place{'s' if places > 1 else ''}."


def _name(table: ChartTable, s: int, c: int) -> str:
    series = f" in {table.series[s]}" if table.series[s] else ""
    return f"{table.categories[c]}{series}"


def generate_question(table: ChartTable, config: ChartCalcConfig, rng: np.random.Generator) -> Question:
    """A question of a kind allowed by ``config`` and applicable to ``table.kind``."""
    kinds = [q for q in config.questions if q in APPLICABLE[table.kind]]  # never empty: the config checks
    kind = kinds[int(rng.integers(len(kinds)))]
    s = int(rng.integers(len(table.series)))
    row = table.values[s]
    n = len(row)
    a, b = (int(i) for i in rng.choice(n, 2, replace=False))
    va, vb = row[a], row[b]
    if kind == "difference":
        if va < vb:
            a, b, va, vb = b, a, vb, va
        text = f"How much greater is the value of {_name(table, s, a)} than that of {_name(table, s, b)}?"
        return Question(kind, f"{text} {_rule(0)}", str(va - vb), f"{va} - {vb}", True, ((s, a), (s, b)))
    if kind == "ratio":
        text = f"What is the value of {_name(table, s, a)} divided by that of {_name(table, s, b)}?"
        answer = _rounded(Fraction(va, vb), 2)
        return Question(kind, f"{text} {_rule(2)}", answer, f"{va} / {vb}", True, ((s, a), (s, b)))
    if kind == "sum":
        picked = sorted(int(i) for i in rng.choice(n, 3, replace=False))
        names = ", ".join(_name(table, s, c) for c in picked[:-1]) + f" and {_name(table, s, picked[-1])}"
        total = sum(row[c] for c in picked)
        expr = " + ".join(str(row[c]) for c in picked)
        text = f"What is the sum of the values of {names}? {_rule(0)}"
        return Question(kind, text, str(total), expr, True, tuple((s, c) for c in picked))
    if kind == "mean":
        where = f" in {table.series[s]}" if table.series[s] else ""
        text = f"What is the mean of the values of all {n} categories{where}? {_rule(2)}"
        expr = f"({' + '.join(map(str, row))}) / {n}"
        reads = tuple((s, c) for c in range(n))
        return Question(kind, text, _rounded(Fraction(sum(row), n), 2), expr, True, reads)
    if kind == "percent_change":
        if len(table.series) > 1:  # one category from an earlier year to a later one
            s, t = sorted(int(i) for i in rng.choice(len(table.series), 2, replace=False))
            va, vb = table.values[s][a], table.values[t][a]
            span = f"{table.categories[a]} from {table.series[s]} to {table.series[t]}"
            reads = ((s, a), (t, a))
        else:
            a, b = min(a, b), max(a, b)
            va, vb = row[a], row[b]
            span = f"from {table.categories[a]} to {table.categories[b]}"
            reads = ((s, a), (s, b))
        text = f"By what percentage did the value change {span} (negative for a decrease)? {_rule(1)}"
        change = Fraction(vb - va, va) * 100
        return Question(kind, text, _rounded(change, 1), f"({vb} - {va}) / {va} * 100", True, reads)
    return _which(table, s, rng)


def _which(table: ChartTable, s: int, rng: np.random.Generator) -> Question:
    """A category chosen after arithmetic: the largest gap between two series, or the one nearest the mean.

    When two categories tie, the question falls back to a difference (no ambiguous answers).
    """
    if len(table.series) > 1:
        s, t = (int(i) for i in rng.choice(len(table.series), 2, replace=False))
        gaps = [table.values[s][c] - table.values[t][c] for c in range(len(table.categories))]
        best = int(np.argmax(gaps))
        text = (
            f"For which category is the value in {table.series[s]} minus the value in {table.series[t]} "
            "the largest? Answer with the category's name."
        )
        pairs = ", ".join(f"{table.values[s][c]} - {table.values[t][c]}" for c in range(len(gaps)))
        scores, expr = [Fraction(g) for g in gaps], f"max({pairs})"
        reads = tuple((u, c) for c in range(len(gaps)) for u in (s, t))
    else:
        row = table.values[0]
        mean = Fraction(sum(row), len(row))
        scores = [-abs(v - mean) for v in row]
        best = int(np.argmax(scores))
        text = (
            "Which category's value is closest to the mean of all the values? "
            "Answer with the category's name."
        )
        expr = f"({' + '.join(map(str, row))}) / {len(row)}"
        reads = tuple((0, c) for c in range(len(row)))
    if sorted(scores)[-1] == sorted(scores)[-2]:
        row = table.values[s]
        big, small = int(np.argmax(row)), int(np.argmin(row))
        text = (
            f"How much greater is the value of {_name(table, s, big)} than that of {_name(table, s, small)}?"
        )
        answer, expr = str(row[big] - row[small]), f"{row[big]} - {row[small]}"
        return Question("difference", f"{text} {_rule(0)}", answer, expr, True, ((s, big), (s, small)))
    return Question("which", text, table.categories[best], expr, False, reads)
