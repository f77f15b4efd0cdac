"""Hostile answers: each returns a wrong verdict within the time limit plus one second, and no code runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sympy.parsing.sympy_parser import parse_expr

from vlm_envs.verify import DEFAULT_TIMEOUT, REASONS, TIMEOUT, grade, grade_local

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
    assert grade("1", "1").correct


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
