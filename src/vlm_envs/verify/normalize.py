"""Turn an answer as a model writes it into clean LaTeX plus the facts grading needs.

Only string work happens here (no sympy): unicode and LaTeX formatting, answer prefixes,
assignments, units and degree marks, and the cheap checks that reject an answer before parsing
(empty, too long, too complex, hedged, a bare choice letter).
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from vlm_envs.verify.extract import answer_region
from vlm_envs.verify.verdict import EMPTY, TOO_COMPLEX, TOO_LONG, UNPARSEABLE

#: Whole responses longer than this are rejected unread (a boxed answer sits in the last part of a response).
MAX_TEXT_CHARS = 20_000
#: Answers (the boxed part, or the whole text without a box) longer than this are rejected.
MAX_ANSWER_CHARS = 400
#: Nesting of braces/parentheses an answer may use; deeper stacks are LaTeX bombs, not answers.
MAX_DEPTH = 8
#: Exponents and fractions an answer may use.
MAX_POWERS = 4
MAX_FRACS = 8

_PRIVATE_SQRT = "\ue000"

_CHAR_MAP = {
    **{c: chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},  # fullwidth ASCII
    0x3000: " ",
    **dict.fromkeys((0x2212, 0x2012, 0x2013, 0x2014, 0xFE63), "-"),
    **dict.fromkeys((0x00A0, *range(0x2000, 0x200B), 0x202F, 0x205F), " "),
    0x221A: _PRIVATE_SQRT,  # √
    0x03C0: r" \pi ",  # π
    0x00B0: r"^\circ ",  # °
    0x00BA: r"^\circ ",  # º, often typed for a degree mark
    0x00D7: r" \times ",
    0x00B7: r" \cdot ",
    0x22C5: r" \cdot ",
    0x00F7: "/",
    0x2044: "/",
    0x00B2: "^2",
    0x00B3: "^3",
    0x2220: r"\angle ",
    0x2248: "=",  # ≈ counts as an assignment: "3√2 ≈ 4.24" answers 4.24
    0x00B1: r" \pm ",
    0x2213: r" \mp ",
}

_DROP = re.compile(
    r"\$|\\[()\[\]]|\\(?:left|right)\b\.?|\\(?:displaystyle|textstyle|quad|qquad|limits)\b|\\[,;:! ]|~"
)
_TEXT_WRAP = re.compile(
    r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|rm|operatorname)\s*\{([^{}]*)\}"
)
_PLAIN_SQRT = re.compile(r"(?<![\\A-Za-z])sqrt(?![A-Za-z])")
_PLAIN_PI = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_PREFIX = re.compile(
    r"^\s*(?:(?:the\s+)?(?:final\s+)?answer(?:\s+is)?\s*[:=]?|therefore|thus|hence|so|\\therefore)\s*,?\s*",
    re.IGNORECASE,
)
_CHOICE_PREFIX = re.compile(r"^\s*(?:\(([A-E])\)\s*[:.]?|([A-E])\s*[:.)])\s+(?=\S)")
_CHOICE_ONLY = re.compile(r"^\s*(?:(?:choice|option)\s+)?\(?([A-E])\)?\s*$", re.IGNORECASE)
_THOUSANDS = re.compile(r"(?<![\d.,])(\d{1,3})((?:,\d{3})+)(?![\d,])")
_HEDGE_WORD = re.compile(r"(?<![\\A-Za-z])(?:or|and|either)(?![A-Za-z])|\\(?:pm|mp|lor|vee)\b", re.IGNORECASE)
_ASSIGN = re.compile(r"(?<![<>!\\])=|\\(?:approx|simeq|equiv)\b")
_DEGREE = re.compile(
    r"\^\s*\{?\s*\\circ\s*\}?|\\circ\b|\\degree\b|(?<![A-Za-z\\])(?:degrees?|deg)(?![A-Za-z])", re.IGNORECASE
)
_RADIAN = re.compile(r"(?<![A-Za-z\\])(?:radians?|rad)(?![A-Za-z])\.?", re.IGNORECASE)
_UNITS = (
    "centimeters|centimetres|millimeters|millimetres|kilometers|kilometres|meters|metres|meter|metre|"
    "inches|inch|feet|foot|ft|yards|yard|yds|yd|miles|mile|mi|cm|mm|km|in|m|units|unit|u|sq|square|cubic"
)
_TRAILING_UNIT = re.compile(
    rf"(?<![A-Za-z\\])(?:{_UNITS})\.?(?:\s*\^\s*\{{?\s*[23]\s*\}}?)?\s*$", re.IGNORECASE
)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_DECIMAL = re.compile(r"^[-+]?\d*\.(\d+)$")
_INTEGER = re.compile(r"^[-+]?\d+$")
_EXPONENT = r"(?:\{[^{}]*\}|\([^()]*\)|\d+|[A-Za-z]|\\[A-Za-z]+)"
#: Exponent towers (``9^{9^9}``, ``9^9^9``), huge exponents and factorials of big or bracketed operands.
_BOMB = re.compile(
    rf"\^\s*\{{[^{{}}]*\^|\^\s*\([^()]*\^|\^\s*{_EXPONENT}\s*\^|\^\s*\{{?\s*\d{{4,}}|\d{{4,}}\s*!|[)}}]\s*!"
)


@dataclass(frozen=True)
class Answer:
    """A normalised answer: LaTeX text plus what grading needs to know about how it was written."""

    text: str
    #: "deg" or "rad" when the answer carried an angle unit, else None.
    angle_unit: str | None = None
    #: A bare multiple-choice letter ("B", "(B)", "option B"), upper-cased.
    letter: str | None = None
    #: Number of decimals of a plain decimal literal ("0.53" -> 2), 0 for an integer literal, else None.
    decimals: int | None = None
    #: Several candidate answers at once ("52 or 53").
    hedge: bool = False
    #: A reason constant when the answer cannot be graded at all (empty, too long, ...), else None.
    problem: str | None = None


def normalize_answer(text: str) -> Answer:
    """Extract and normalise the answer in ``text`` (a full response or just the answer)."""
    if len(text) > MAX_TEXT_CHARS:
        return Answer("", problem=TOO_LONG)
    region, multi_hedge = answer_region(text)
    if len(region) > MAX_ANSWER_CHARS:
        return Answer("", problem=TOO_LONG)
    s = _clean_latex(_clean_unicode(region))
    s = _PREFIX.sub("", s, count=1).strip().rstrip(".,; ")
    letter = _CHOICE_ONLY.match(s)
    if letter and letter.group(1).isupper():
        return Answer(letter.group(1), letter=letter.group(1))
    s = _CHOICE_PREFIX.sub("", s, count=1)
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    hedge = multi_hedge or bool(_HEDGE_WORD.search(s)) or _has_top_level(s, ",;")
    if not hedge:
        s = _after_last_assignment(s)
    s, unit = _strip_angle_units(s)
    s = _strip_units(s)
    s = s.strip().rstrip(".").strip().removeprefix("+").strip()
    while s.startswith("{") and _closing(s, 0) == len(s) - 1:
        s = s[1:-1].strip()
    return Answer(s, angle_unit=unit, decimals=_decimals(s), hedge=hedge, problem=_problem(s, unit))


def _clean_unicode(s: str) -> str:
    """Fullwidth digits, unicode minus and spaces, √ π ° and friends to ASCII/LaTeX; drop invisibles."""
    s = s.translate(_CHAR_MAP).replace("**", "^")
    s = "".join(" " if c in "\t\n\r" else c for c in s if c == _PRIVATE_SQRT or not _invisible(c))
    s = _PLAIN_SQRT.sub(_PRIVATE_SQRT, s)
    s = _PLAIN_PI.sub(r" \\pi ", s)
    return _expand_sqrt(s)


def _invisible(c: str) -> bool:
    """Control, format (zero-width, bidi), private-use and surrogate characters; tabs/newlines excepted."""
    return unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs") and c not in "\t\n\r"


def _expand_sqrt(s: str) -> str:
    """Rewrite ``√2``, ``√(x+1)``, ``sqrt 12``, ``√{3}`` as ``\\sqrt{...}``."""
    out: list[str] = []
    i = 0
    while True:
        j = s.find(_PRIVATE_SQRT, i)
        if j < 0:
            out.append(s[i:])
            return "".join(out)
        out.append(s[i:j])
        k = j + 1
        while k < len(s) and s[k] == " ":
            k += 1
        arg_end = k
        if k < len(s) and s[k] == "(":
            close = _closing(s, k)
            if close is not None:
                out.append(r"\sqrt{" + s[k + 1 : close] + "}")
                i = close + 1
                continue
        m = re.compile(r"\d+(?:\.\d+)?|\\[A-Za-z]+|[A-Za-z]").match(s, k)
        if m:
            out.append(r"\sqrt{" + m.group(0) + "}")
            i = m.end()
            continue
        out.append(r"\sqrt")
        i = arg_end


def _clean_latex(s: str) -> str:
    """Drop math delimiters, spacing and sizing commands; unwrap ``\\text{}``; unify fraction commands."""
    s = _DROP.sub(" ", s)
    s = s.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac").replace("{,}", ",")
    for _ in range(3):
        s, n = _TEXT_WRAP.subn(r" \1 ", s)
        if not n:
            break
    return re.sub(r"\s+", " ", s).strip()


def _strip_angle_units(s: str) -> tuple[str, str | None]:
    s, n_deg = _DEGREE.subn(" ", s)
    s, n_rad = _RADIAN.subn(" ", s)
    if n_deg and n_rad:
        return s, "mixed"
    return s, "deg" if n_deg else "rad" if n_rad else None


def _strip_units(s: str) -> str:
    """Strip trailing length/area units ("5 cm", "12 square units", "3 ft^2") while a value remains."""
    for _ in range(4):
        m = _TRAILING_UNIT.search(s)
        if m is None or not s[: m.start()].strip():
            break
        s = s[: m.start()].rstrip()
    return s


_PAIRS = {"(": ")", "[": "]", "{": "}"}


def _brackets(s: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """``(index, depth after it)`` at each bracket from ``start`` (backslash escapes skipped).

    Raises ``ValueError`` at a closing bracket that does not match the innermost open one.
    """
    stack: list[str] = []
    i = start
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c in _PAIRS:
            stack.append(_PAIRS[c])
            yield i, len(stack)
        elif c in ")]}":
            if not stack or stack.pop() != c:
                raise ValueError(f"unbalanced {c!r} at {i}")
            yield i, len(stack)
        i += 1


def _closing(s: str, start: int) -> int | None:
    """Index of the bracket closing the one at ``start``, or None."""
    with contextlib.suppress(ValueError):
        return next((i for i, depth in _brackets(s, start) if depth == 0), None)
    return None


def _depth(s: str) -> int | None:
    """Deepest bracket nesting of ``s``, or None if its brackets do not balance."""
    deepest, depth = 0, 0
    try:
        for _, depth in _brackets(s):
            deepest = max(deepest, depth)
    except ValueError:
        return None
    return None if depth else deepest


def _has_top_level(s: str, chars: str) -> bool:
    """Whether any of ``chars`` occurs outside all brackets (a list, not a coordinate pair)."""
    level = 0
    for c in s:
        if c in "([{":
            level += 1
        elif c in ")]}":
            level -= 1
        elif c in chars and level <= 0:
            return True
    return False


def _after_last_assignment(s: str) -> str:
    """The right-hand side of the last top-level ``=`` or ``\\approx`` ("m\\angle C = 127" -> "127")."""
    level = 0
    cut = 0
    depth_at = []
    for c in s:
        level += (c in "([{") - (c in ")]}")
        depth_at.append(level)
    for m in _ASSIGN.finditer(s):
        if depth_at[m.start()] <= 0:
            cut = m.end()
    return s[cut:]


def _decimals(s: str) -> int | None:
    m = _DECIMAL.match(s)
    if m:
        return len(m.group(1))
    return 0 if _INTEGER.match(s) else None


def _problem(s: str, unit: str | None) -> str | None:
    """Why ``s`` cannot be graded, checked cheaply before any parser sees it; None if it may be parsed."""
    if not s:
        return EMPTY
    if len(s) > MAX_ANSWER_CHARS:
        return TOO_LONG
    depth = _depth(s)
    if depth is None or unit == "mixed" or _WORD.search(s):
        return UNPARSEABLE
    if depth > MAX_DEPTH or s.count("^") > MAX_POWERS or s.count(r"\frac") > MAX_FRACS:
        return TOO_COMPLEX
    if _BOMB.search(s):
        return TOO_COMPLEX
    return None
