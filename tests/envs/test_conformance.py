"""Every env registered through entry points passes the conformance suite."""

import pytest

from vlm_envs import build_env, list_envs
from vlm_envs.checker import check_env
from vlm_envs.checker.calls import UNICODE_DIGITS

ENV_NAMES = [spec.name for spec in list_envs()]


def test_the_shipped_envs_are_registered():
    assert {"sokoban", "geo3k"} <= set(ENV_NAMES)


@pytest.mark.parametrize("name", ENV_NAMES)
def test_registered_env_passes_check_env(name):
    check_env(build_env(name))


#: Math answers are read by value in any script's digits (math-verify reads ``١٢`` as 12): not a lookalike.
READS_ANY_DIGITS = {"geo3k"}


@pytest.mark.parametrize("name", sorted(set(ENV_NAMES) - READS_ANY_DIGITS))
@pytest.mark.parametrize("family", sorted(UNICODE_DIGITS))
def test_the_oracle_reply_in_other_digits_is_refused_not_read_as_ascii(name, family):
    env = build_env(name)
    env.reset(seed=0)
    reply = env.oracle_response()
    lookalike = (reply or "").translate(str.maketrans("0123456789", UNICODE_DIGITS[family]))
    if lookalike == (reply or ""):
        pytest.skip(f"{name}'s oracle reply holds no digits")
    _, done, info = env.step(lookalike)
    assert not info.metrics.get("format_valid", False) and not info.metrics.get("success", False), info
    assert not (done and env.episode_reward() > 0)


def test_matchstick_answers_with_other_digits_are_format_errors():
    env = build_env("matchstick", max_turns=5)
    env.reset(seed=0)
    for reply in ("<answer>6+1=7\u0663</answer>", "<answer>\u0666 + \u0665 = \u0661\u0661</answer>"):
        obs, done, info = env.step(reply)
        assert info.metrics["format_valid"] is False and not done and "Invalid answer" in obs.text
