"""Hostile answers: each returns a wrong verdict within the time limit plus one second, and no code runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.parsing.sympy_parser import parse_expr

from vlm_envs.verify import (
    CHOICE_LETTER,
    DEFAULT_TIMEOUT,
    EMPTY,
    REASONS,
    ROUNDED_MATCH,
    TIMEOUT,
    TOO_COMPLEX,
    TOO_LONG,
    UNPARSEABLE,
    bounded,
    compare,
    grade,
    grade_local,
    shutdown,
)
from vlm_envs.verify.normalize import normalize_answer
from vlm_envs.verify.quick import quick_verdict

HOSTILE = {
    "tower": r"9^{9^{9^{9}}}",
    "python tower": "9**9**9**9",
    "chained powers": "10^10^10",
    "paren tower": "2^(2^(2^(2^99)))",
    "huge exponent": "7^{123456789}",
    "huge factorial": "100000!",
    "bracket factorial": "(10^{100})!",
    "nested fractions": r"\frac{1}{1+" * 300 + "1" + "}" * 300,
    "megabyte of digits": "3." + "1" * 1_000_000,
    "boxed megabyte": r"\boxed{" + "9" * 1_000_000 + "}",
    "megabyte of braces": "{" * 1_000_000,
    "unbalanced braces": r"\boxed{\frac{1}{2}" + "{" * 50,
    "unbalanced closers": "}}}}5{{{",
    "many boxes": r"\boxed{1}" * 2000,
    "null bytes": "5\x00\x00\x00",
    "only null bytes": "\x00" * 10_000,
    "lone surrogate": "\ud800 5",
    "bidi override": "\u202e5\u202c",
    "homoglyph digits": "\u0665",
    "latex def bomb": r"\def\a{\a\a}\a",
    "newcommand": r"\newcommand{\x}{\x\x}\x",
    "input file": r"\input{/etc/passwd}",
    "huge sum": r"\sum_{i=1}^{10^{12}} i",
    "many terms": "+".join(["1"] * 150),
    "python code": "__import__('os').system('true')",
    "dunder chain": "().__class__.__bases__[0].__subclasses__()",
    "lambda": "(lambda: 5)()",
}


@pytest.fixture(scope="module", autouse=True)
def warm_pool() -> None:
    """Start the workers before timing anything: start-up is not part of a call's limit."""
    assert grade("4.24", r"3\sqrt{2}").correct  # needs a worker ("1" against "1" needs none)


@pytest.mark.parametrize("answer", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_answer_gets_a_prompt_wrong_verdict(answer: str) -> None:
    start = time.monotonic()
    verdict = grade(answer, "7")
    elapsed = time.monotonic() - start
    assert not verdict.correct
    assert verdict.reason in REASONS
    assert elapsed < DEFAULT_TIMEOUT + 1.0, (elapsed, verdict)


def test_slow_comparison_is_killed_at_the_limit_and_the_pool_recovers() -> None:
    slow = (r"\frac{(x+1)^{60}}{(x-1)^{60}}", r"\frac{(x+2)^{60}}{(x-2)^{60}}")  # ~4 s of sympy
    start = time.monotonic()
    verdict = grade(*slow, timeout=0.5)
    assert verdict.reason == TIMEOUT and not verdict.correct
    assert time.monotonic() - start < 1.5
    for _ in range(3):  # every worker, the replacement included, still grades
        assert grade("0.53", r"\frac{8}{15}").correct


CODE_PAYLOADS = [
    "__import__('os').system('touch {path}')",
    r"\boxed{__import__('os').system('touch {path}')}",
    "x = __import__('os').system('touch {path}')",
    '$__import__("os").system("touch {path}")$',
    "exec(\"import os; os.system('touch {path}')\")",
    "eval(\"__import__('os').system('touch {path}')\")",
    r"\text{__import__('os').system('touch {path}')}",
]


def test_the_payloads_do_run_when_evaluated(tmp_path: Path) -> None:
    """Sanity check of the attack itself: sympy's parse_expr executes it."""
    marker = tmp_path / "ran"
    parse_expr(CODE_PAYLOADS[0].replace("{path}", str(marker)))
    assert marker.exists()


@pytest.mark.parametrize("payload", CODE_PAYLOADS)
def test_model_text_never_runs_as_code(payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = payload.replace("{path}", str(marker))
    for verdict in (grade(text, "0"), grade_local(text, "0"), grade("0", text), grade_local(text, text)):
        assert not verdict.correct, verdict
    assert not marker.exists()


NO_PARSER_NEEDED = {
    "NaN": ("NaN", UNPARSEABLE),
    "a word": ("infinity", UNPARSEABLE),
    "open nesting": ("((1+1+" * 60, UNPARSEABLE),
    "tower": (r"9^{9^{9^{9}}}", TOO_COMPLEX),
    "cut box": ("9" * 4097, TOO_LONG),
    "megabytes": ("9" * 5_000_000, TOO_LONG),
    "letter": ("B", CHOICE_LETTER),
    "empty box": (r"\boxed{}", EMPTY),
    "decimals": ("7.04", ROUNDED_MATCH),
}


@pytest.mark.parametrize(("answer", "reason"), NO_PARSER_NEEDED.values(), ids=NO_PARSER_NEEDED.keys())
def test_answers_needing_no_parser_are_graded_without_a_worker(answer: str, reason: str) -> None:
    """Issue #33: ``\\boxed{NaN}`` waited 3.4 s for the grading processes to start; it needs none."""
    shutdown()
    verdict = grade(answer, "7.0")
    assert verdict.reason == reason
    assert bounded._pool is None


decimal = st.from_regex(r"-?\d{1,6}(\.\d{1,6})?", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(decimal, decimal)
def test_two_plain_numbers_get_the_verdict_the_parser_gives(prediction: str, truth: str) -> None:
    """The in-caller comparison of plain numbers agrees with math-verify's parse and the sympy values."""
    pred, label = normalize_answer(prediction), normalize_answer(truth)
    quick = quick_verdict(pred, label)
    assert quick is not None
    parsed = compare._compare(pred, compare._parse(pred.text), label, compare._parse(label.text))
    assert (quick.correct, quick.reason) == parsed
