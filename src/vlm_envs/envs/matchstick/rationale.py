"""Matchstick's oracle rationale: why the equation shown is false and which symbols one moved stick
changes to make it true."""

from __future__ import annotations

from vlm_envs.envs.matchstick.equation import Equation
from vlm_envs.envs.phrasing import series

_SIGNS = {"+": "plus sign", "-": "minus sign"}


def parts(equation: Equation) -> list[str]:
    """Which part each movable symbol belongs to, left to right."""
    return (
        ["first number"] * len(equation.left)
        + ["sign"]
        + ["second number"] * len(equation.right)
        + ["result"] * len(equation.result)
    )


def explain(shown: Equation, answer: Equation) -> str:
    """Why ``answer`` (one stick move from ``shown``, and true) is the fix."""
    lhs = f"{shown.left} {shown.op} {shown.right}"
    changes = []
    for part, before, after in zip(parts(shown), shown.symbols, answer.symbols, strict=True):
        if before == after:
            continue
        if part == "sign":
            changes.append(f"the {_SIGNS[before]} into a {_SIGNS[after]}")
        else:
            changes.append(f"the {before} in the {part} into a {after}")
    return (
        f"The sticks read {shown}, which is false: {lhs} makes {shown.value}. Moving one stick turns "
        f"{series(changes)}, giving {answer}, which is true."
    )
