"""Potential-based shaping from the distance: each term, and what it adds up to."""

from __future__ import annotations

import math

import pytest

from vlm_envs.credit.shaping import PotentialShaping, potential, shaping_terms
from vlm_envs.state_signals import UNREACHABLE


def test_potential() -> None:
    assert potential(3, unreachable=10) == -3.0
    assert potential(0, unreachable=10) == 0.0
    assert potential(UNREACHABLE, unreachable=10) == -10.0
    assert potential(None, unreachable=10) is None


def test_terms_reward_progress_and_punish_regress() -> None:
    # 3 -> 2 (progress), 2 -> 3 (regress), 3 -> 2, 2 -> 1, 1 -> 0 (solved, the episode ended)
    before, after = [3, 2, 3, 2, 1], [2, 3, 2, 1, 0]
    assert shaping_terms(before, after, ended=True, gamma=1.0, unreachable=8) == [1.0, -1.0, 1.0, 1.0, 1.0]
    terms = shaping_terms(before, after, ended=True, gamma=0.9, unreachable=8)
    assert terms == pytest.approx([3 - 0.9 * 2, 2 - 0.9 * 3, 3 - 0.9 * 2, 2 - 0.9 * 1, 1.0])


def test_terms_add_up_to_the_start_potential_whatever_the_path() -> None:
    """With gamma = 1 and an ended episode the terms telescope to -phi(s_0): no path is favoured."""
    paths = ([4, 3, 2, 1], [4, 5, 4, 3, 2, 1], [4, UNREACHABLE, UNREACHABLE])
    for distances in paths:
        after = [*distances[1:], 0]
        assert math.fsum(shaping_terms(distances, after, ended=True, gamma=1.0, unreachable=9)) == 4.0


def test_the_ending_turn_leads_to_potential_zero_and_unknowns_add_nothing() -> None:
    # a wrong final answer: 1 -> UNREACHABLE, and the episode ended there
    assert shaping_terms([1], [UNREACHABLE], ended=True, gamma=1.0, unreachable=9) == [1.0]
    # the same state while the episode goes on (truncated): phi = -9
    assert shaping_terms([1], [UNREACHABLE], ended=False, gamma=1.0, unreachable=9) == [-8.0]
    assert shaping_terms([None, 2], [2, 1], ended=False, gamma=1.0, unreachable=9) == [0.0, 1.0]
    with pytest.raises(ValueError, match="distances"):
        shaping_terms([1, 2], [1], ended=False, gamma=1.0, unreachable=9)


@pytest.mark.parametrize("bad", [-1, math.inf, math.nan, True])
def test_shaping_refuses_a_bad_unreachable_distance(bad: float) -> None:
    with pytest.raises(ValueError, match="unreachable"):
        PotentialShaping(unreachable=bad)
