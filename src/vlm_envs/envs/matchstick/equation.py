"""Matchstick equations: ``A op B = C`` written in matchsticks, and the one-stick moves between them.

Digits are seven-segment figures (segments ``a`` top, ``b`` upper right, ``c`` lower right, ``d`` bottom,
``e`` lower left, ``f`` upper left, ``g`` middle), ``+`` is a horizontal and a vertical stick, ``-`` one
horizontal stick, and ``=`` two sticks that never move. A move takes one stick from a symbol and lays it
anywhere in another or the same symbol (a stick may turn), and every symbol must still be a digit or an
operator. Numbers keep their digit count and have no leading zero.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

#: The sticks of each symbol (``h``/``v``: the horizontal and vertical stick of an operator).
SEGMENTS: dict[str, frozenset[str]] = {
    "0": frozenset("abcdef"),
    "1": frozenset("bc"),
    "2": frozenset("abdeg"),
    "3": frozenset("abcdg"),
    "4": frozenset("bcfg"),
    "5": frozenset("acdfg"),
    "6": frozenset("acdefg"),
    "7": frozenset("abc"),
    "8": frozenset("abcdefg"),
    "9": frozenset("abcdfg"),
    "+": frozenset("hv"),
    "-": frozenset("h"),
}
_BY_SEGMENTS = {sticks: symbol for symbol, sticks in SEGMENTS.items()}
_DIGIT_SLOTS, _OPERATOR_SLOTS = frozenset("abcdefg"), frozenset("hv")
#: ASCII digits only: ``\d`` would take any script's digits, which have no sticks.
_EQUATION = re.compile(r"\s*([0-9]{1,3})\s*([+\-−])\s*([0-9]{1,3})\s*=\s*([0-9]{1,4})\s*")


@dataclasses.dataclass(frozen=True)
class Equation:
    """``left op right = result`` as digit strings (what the sticks show, true or not)."""

    left: str
    op: str
    right: str
    result: str

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right} = {self.result}"

    @property
    def symbols(self) -> str:
        """Every symbol that has movable sticks, left to right (the ``=`` is left out)."""
        return self.left + self.op + self.right + self.result

    @property
    def value(self) -> int:
        """What the left side makes."""
        return int(self.left) + int(self.right) if self.op == "+" else int(self.left) - int(self.right)

    @property
    def true(self) -> bool:
        return self.value == int(self.result)

    def with_symbols(self, symbols: str) -> Equation | None:
        """The same layout with other symbols, or None when they do not make ``number op number =
        number`` without leading zeros."""
        a, b = len(self.left), len(self.left) + 1
        c = b + len(self.right)
        left, op, right, result = symbols[:a], symbols[a], symbols[b:c], symbols[c:]
        parts = (left, right, result)
        if op not in "+-" or not all(p.isdigit() and (len(p) == 1 or p[0] != "0") for p in parts):
            return None
        return Equation(left, op, right, result)


def parse(text: str) -> Equation | None:
    """An equation written ``12 + 3 = 15`` (``−`` for minus too), or None."""
    match = _EQUATION.fullmatch(text)
    if match is None:
        return None
    left, op, right, result = match.groups()
    return Equation(left, "-" if op == "−" else op, right, result)


def sticks(equation: Equation) -> int:
    """How many sticks the equation is made of, the two of ``=`` included."""
    return 2 + sum(len(SEGMENTS[s]) for s in equation.symbols)


def _slots(symbol: str) -> frozenset[str]:
    return _OPERATOR_SLOTS if symbol in "+-" else _DIGIT_SLOTS


def one_move_away(shown: Equation, answer: Equation) -> bool:
    """Whether ``answer`` has the layout of ``shown`` and differs from it by moving exactly one stick."""
    if (len(answer.left), len(answer.right), len(answer.result)) != (
        len(shown.left),
        len(shown.right),
        len(shown.result),
    ):
        return False
    removed = added = 0
    for before, after in zip(shown.symbols, answer.symbols, strict=True):
        removed += len(SEGMENTS[before] - SEGMENTS[after])
        added += len(SEGMENTS[after] - SEGMENTS[before])
    return removed == added == 1


def moves(equation: Equation) -> Iterator[Equation]:
    """Every equation one stick move away (true or not), each once, in a fixed order."""
    symbols = equation.symbols
    seen = set()
    for i, source in enumerate(symbols):
        for stick in sorted(SEGMENTS[source]):
            taken = SEGMENTS[source] - {stick}
            for j, target in enumerate(symbols):
                base = taken if i == j else SEGMENTS[target]
                for slot in sorted(_slots(target) - base - ({stick} if i == j else set())):
                    new_target = _BY_SEGMENTS.get(base | {slot})
                    new_source = _BY_SEGMENTS.get(taken)
                    if new_target is None or (i != j and new_source is None):
                        continue
                    out = list(symbols)
                    out[j] = new_target
                    if i != j:
                        out[i] = new_source  # type: ignore[assignment]
                    moved = equation.with_symbols("".join(out))
                    if moved is not None and moved != equation and moved not in seen:
                        seen.add(moved)
                        yield moved
