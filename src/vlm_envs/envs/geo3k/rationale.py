"""Geo3k's oracle rationale: the relation that gives the answer, and why check it with ``calc_score`` first.

The relation is the problem's own worked ``solution`` (generated problems write one from the diagram's
labels); a dataset row has none, and then only the answer and the reason for the call are said.
"""

from __future__ import annotations

from vlm_envs.envs.geo3k.problems import Geo3kProblem


def explain(problem: Geo3kProblem, checking: bool, confirmed: bool) -> str:
    """Why the oracle calls ``calc_score`` on the answer now (``checking``) or gives it as final;
    ``confirmed``: a ``calc_score`` call this episode scored the answer correct."""
    answer = problem.answer
    lead = f"{problem.solution} So the answer is {answer}" if problem.solution else f"My answer is {answer}"
    if checking:
        return f"{lead}; I check it with calc_score before I give it as final."
    if confirmed:
        return f"{lead}, and calc_score confirmed it, so I give it as my final answer."
    return f"{lead}."
