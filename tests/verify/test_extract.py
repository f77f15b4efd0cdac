"""extract_boxed and the Verdict wire form."""

from __future__ import annotations

import time

import pytest

from vlm_envs.verify import EQUAL, MAX_ANSWER_CHARS, TOO_LONG, Verdict, extract_boxed, grade
from vlm_envs.verify.extract import MAX_BOXED_CHARS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so \boxed{5}.", "5"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{3} then \boxed{4}", "4"),
        (r"\boxed {x^{2}}", "x^{2}"),
        (r"\fbox{7}", "7"),
        (r"\boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\boxed{9}}", "9"),
        (r"\boxed{}", ""),
        ("no box here", None),
        (r"\boxed{5", None),
        (r"\boxed{3} and a truncated \boxed{4", None),
        (r"\boxed   {5}", "5"),
        (r"\boxed" + " " * 33 + "{5}", None),
        (r"\boxed{1} " + r"\boxed x " * 10, "1"),
        (r"\boxed{1} " + r"\boxed x " * 100, None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        r"\boxed{" + "9" * 32_000_000 + "}",
        r"\boxed{" + "{" * 32_000_000 + "}",
        r"\boxed{" + "9" * 32_000_000,
        r"\boxed" + "{" * 100_000,
    ],
    ids=["32 MB box", "32 MB of braces", "32 MB never closed", "100k openings"],
)
def test_an_over_long_box_comes_back_cut_just_over_the_cap(text: str) -> None:
    """Issue #33: a 32 MB box was scanned whole in Python (11-13 s) and handed on whole. The scan now
    stops one character past the cap, so the answer reads as too long everywhere downstream."""
    content = extract_boxed(text)
    assert content is not None and len(content) == MAX_BOXED_CHARS + 1
    assert MAX_BOXED_CHARS > MAX_ANSWER_CHARS  # so graders see it as too long
    assert grade(content, "9").reason == TOO_LONG


def test_finding_the_last_box_does_not_scan_mentions_one_by_one() -> None:
    """Millions of ``\\boxed`` mentions without a brace (or of spaces after one) are given up on early."""
    for text in (r"\boxed " * 5_000_000, r"\boxed" + " " * 32_000_000 + "{5}", "9" * 32_000_000):
        start = time.perf_counter()
        assert extract_boxed(text) is None
        assert time.perf_counter() - start < 1.0  # about 0.03 s; a scan per mention took 2 s


def test_verdict_round_trips_and_rejects_garbage() -> None:
    verdict = Verdict(True, EQUAL, "5", "5")
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    for bad in ({"correct": True, "reason": "looks fine"}, {"correct": "yes", "reason": EQUAL}, [], None):
        with pytest.raises(ValueError):
            Verdict.from_dict(bad)  # type: ignore[arg-type]
