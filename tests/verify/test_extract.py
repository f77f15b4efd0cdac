"""extract_boxed and the Verdict wire form."""

from __future__ import annotations

import pytest

from vlm_envs.verify import EQUAL, Verdict, extract_boxed


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
        (r"\boxed" + "{" * 100_000, None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected


def test_verdict_round_trips_and_rejects_garbage() -> None:
    verdict = Verdict(True, EQUAL, "5", "5")
    assert Verdict.from_dict(verdict.to_dict()) == verdict
    for bad in ({"correct": True, "reason": "looks fine"}, {"correct": "yes", "reason": EQUAL}, [], None):
        with pytest.raises(ValueError):
            Verdict.from_dict(bad)  # type: ignore[arg-type]
