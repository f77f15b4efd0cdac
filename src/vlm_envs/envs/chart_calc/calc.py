"""The ``calc`` tool: a small arithmetic evaluator for model text, bounded in size, depth and magnitude.

Numbers, ``+ - * /``, ``^`` (or ``**``, right-associative), parentheses, unary signs and the functions
in :data:`FUNCTIONS`. A tokenizer and a recursive-descent parser over floats; nothing is ever handed to
``eval`` or sympy. Every limit is checked before the work it guards, so any input is answered (a value
or a :class:`CalcError`) in microseconds to a millisecond.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

#: Longest expression accepted, in characters (a chart question needs a few dozen).
MAX_EXPRESSION_CHARS = 500
MAX_TOKENS = 200
MAX_DEPTH = 32
#: Longest number literal, in characters.
MAX_NUMBER_CHARS = 32
#: ``a ^ b`` is refused when ``|b|`` exceeds this, before it is computed.
MAX_EXPONENT = 1000
#: Results (and intermediate values) larger than this in magnitude are refused.
MAX_MAGNITUDE = 1e300


class CalcError(ValueError):
    """The expression cannot be evaluated; the message says why, for the model to read."""


def _round(x: float, digits: float = 0) -> float:
    if digits != int(digits) or not 0 <= digits <= 12:
        raise CalcError("round(x, n) takes a whole number of digits n from 0 to 12")
    return float(round(x, int(digits)))


def _sqrt(x: float) -> float:
    if x < 0:
        raise CalcError("sqrt of a negative number")
    return math.sqrt(x)


#: name -> (function, least arguments, most arguments)
FUNCTIONS: dict[str, tuple[Callable[..., float], int, int]] = {
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 1, 20),
    "max": (max, 1, 20),
}

_TOKEN = re.compile(
    r"\s*(?:(\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|(\*\*|[-+*/^(),])|([A-Za-z_]\w*))",
    re.ASCII,
)


def tokenize(text: str) -> list[str]:
    """The tokens of ``text``; ``CalcError`` on a character that is not part of the language."""
    tokens: list[str] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            bad = text[pos:end].lstrip()[:1]
            raise CalcError(
                f"unexpected character {bad!r}; use numbers, + - * / ^, parentheses and functions"
            )
        token = m.group(1) or m.group(2) or m.group(3)
        if m.group(1) and len(token) > MAX_NUMBER_CHARS:
            raise CalcError(f"a number is {len(token)} characters long; the limit is {MAX_NUMBER_CHARS}")
        tokens.append("^" if token == "**" else token)
        if len(tokens) > MAX_TOKENS:
            raise CalcError(f"the expression has more than {MAX_TOKENS} tokens")
        pos = m.end()
    return tokens


def _checked(value: float) -> float:
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise CalcError(f"the result is larger than {MAX_MAGNITUDE:g} in magnitude")
    return value


class _Parser:
    """Recursive descent: expr := term (+|- term)*; term := unary (*|/ unary)*;
    unary := (+|-) unary | power; power := atom (^ unary)?; atom := number | name(args) | (expr)."""

    def __init__(self, tokens: list[str]):
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            want = repr(expected) if expected else "more input"
            raise CalcError(
                f"expected {want} but the expression {'ends' if token is None else f'has {token!r}'}"
            )
        self.pos += 1
        return token

    def nested(self, parse: Callable[[], float]) -> float:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise CalcError(f"the expression is nested more than {MAX_DEPTH} levels deep")
        try:
            return parse()
        finally:
            self.depth -= 1

    def expr(self) -> float:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            right = self.term()
            value = _checked(value + right if op == "+" else value - right)
        return value

    def term(self) -> float:
        value = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            right = self.unary()
            if op == "/" and right == 0:
                raise CalcError("division by zero")
            value = _checked(value * right if op == "*" else value / right)
        return value

    def unary(self) -> float:
        if self.peek() in ("+", "-"):
            sign = -1.0 if self.take() == "-" else 1.0
            return sign * self.nested(self.unary)
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        exponent = self.nested(self.unary)
        if abs(exponent) > MAX_EXPONENT:
            raise CalcError(f"an exponent of {exponent:g} is beyond the limit of {MAX_EXPONENT}")
        if base == 0 and exponent < 0:
            raise CalcError("division by zero (0 to a negative power)")
        if base < 0 and exponent != int(exponent):
            raise CalcError("a negative number to a fractional power is not a real number")
        try:
            return _checked(math.pow(base, exponent))
        except OverflowError:
            raise CalcError(f"the result is larger than {MAX_MAGNITUDE:g} in magnitude") from None

    def atom(self) -> float:
        token = self.take()
        if token == "(":
            value = self.nested(self.expr)
            self.take(")")
            return value
        if token[0].isdigit() or token[0] == ".":
            return _checked(float(token))
        if token[0].isalpha() or token[0] == "_":
            return self.call(token)
        raise CalcError(f"unexpected {token!r}")

    def call(self, name: str) -> float:
        if name not in FUNCTIONS:
            known = ", ".join(FUNCTIONS)
            raise CalcError(f"unknown name {name[:40]!r}; the functions are {known}")
        function, least, most = FUNCTIONS[name]
        self.take("(")
        args = [self.nested(self.expr)]
        while self.peek() == ",":
            self.take()
            args.append(self.nested(self.expr))
        self.take(")")
        if not least <= len(args) <= most:
            raise CalcError(f"{name} takes {least} to {most} arguments, got {len(args)}")
        return _checked(float(function(*args)))


def evaluate(expression: str) -> float:
    """The value of ``expression``; ``CalcError`` saying what is wrong otherwise."""
    if not isinstance(expression, str):
        raise CalcError('the expression must be a string such as "(57 - 32) / 32"')
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalcError(
            f"the expression is {len(expression)} characters long; the limit is {MAX_EXPRESSION_CHARS}"
        )
    if not expression.strip():
        raise CalcError("the expression is empty")
    parser = _Parser(tokenize(expression))
    value = parser.expr()
    if parser.peek() is not None:
        raise CalcError(f"unexpected {parser.peek()!r} after a complete expression")
    return value


def format_value(value: float) -> str:
    """A result as the tool shows it: whole numbers without a point, others to 12 significant digits."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.12g}"
