"""GiGPO's advantages on hand-built groups whose answers are worked out by hand."""

from __future__ import annotations

import math

import pytest

from vlm_envs.credit.gigpo import CreditTurn, discounted_returns, gigpo_advantages, relative


def test_discounted_returns() -> None:
    assert discounted_returns([0.0, 0.0, 1.0], 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns([], 0.9) == []


def test_relative_uses_bessels_std_and_gives_a_lone_value_nothing() -> None:
    # mean 2, sample variance ((1)^2 + 0 + 1) / 2 = 1
    assert relative([1.0, 2.0, 3.0], "std", eps=0.0) == [-1.0, 0.0, 1.0]
    assert relative([1.0, 2.0, 3.0], "mean") == [-1.0, 0.0, 1.0]
    assert relative([5.0], "std") == [0.0]
    assert relative([4.0, 4.0], "std") == [0.0, 0.0]
    with pytest.raises(ValueError, match="scale"):
        relative([1.0, 2.0], "max")  # type: ignore[arg-type]


def test_two_episodes_sharing_a_start_state() -> None:
    """Episode a: s0 -> s1 -> goal (return 1); episode b: s0 -> s2 -> s2 (return 0). Both acted from s0;
    b acted twice from s2 with different returns-to-go."""
    gamma = 0.5
    a = discounted_returns([0.0, 1.0], gamma)  # [0.5, 1.0]
    b = discounted_returns([0.0, 0.0, 0.0], gamma)  # [0, 0, 0]
    turns = [
        CreditTurn("g", "a", "s0", 1.0, a[0]),
        CreditTurn("g", "a", "s1", 1.0, a[1]),
        CreditTurn("g", "b", "s0", 0.0, b[0]),
        CreditTurn("g", "b", "s2", 0.0, b[1]),
        CreditTurn("g", "b", "s2", 0.0, b[2]),
    ]
    got = gigpo_advantages(turns, scale="mean", step_weight=2.0)
    # episode level (mean): a +0.5, b -0.5; s0's anchor group [0.5, 0] -> +0.25 / -0.25; s1 alone -> 0;
    # s2's anchor group [0, 0] -> 0
    assert got == [0.5 + 2 * 0.25, 0.5, -0.5 - 2 * 0.25, -0.5, -0.5]
    std = gigpo_advantages(turns, eps=0.0)
    # Bessel's std of [1, 0] is sqrt(0.5), of [0.5, 0] sqrt(0.125); s2's equal returns give 0
    e, s = 0.5 / math.sqrt(0.5), 0.25 / math.sqrt(0.125)
    assert std == pytest.approx([e + s, e, -e - s, -e, -e])


def test_groups_and_keys_stay_apart() -> None:
    """The same key in two groups is two anchor states; a turn without a key joins none."""
    turns = [
        CreditTurn(1, "a", "s", 1.0, 1.0),
        CreditTurn(1, "b", "s", 0.0, 0.0),
        CreditTurn(2, "c", "s", 1.0, 3.0),
        CreditTurn(2, "d", None, 1.0, 0.0),
    ]
    got = gigpo_advantages(turns, scale="mean")
    # group 1: episodes +0.5/-0.5, anchor (1, s) [1, 0] -> +0.5/-0.5; group 2: equal returns -> 0,
    # anchor (2, s) has one member -> 0, the keyless turn -> 0
    assert got == [1.0, -1.0, 0.0, 0.0]


def test_an_episode_with_two_returns_is_refused() -> None:
    with pytest.raises(ValueError, match="two different returns"):
        gigpo_advantages([CreditTurn("g", "a", "s", 1.0, 1.0), CreditTurn("g", "a", "t", 0.0, 0.0)])
    with pytest.raises(ValueError, match="finite"):
        gigpo_advantages([], step_weight=math.nan)
