"""``vlm-envs eval --help`` says where every limit of a run is set and its default, and the defaults it
states are the ones a run uses (:class:`~vlm_envs.eval.policies.PolicyOptions`)."""

from __future__ import annotations

import pytest

from vlm_envs.cli import main
from vlm_envs.eval.openai_chat import OpenAIChatClient
from vlm_envs.eval.policies import PolicyOptions


def test_eval_help_names_each_limit_and_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["eval", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    options = PolicyOptions()
    for flag, default in (
        ("--timeout", options.timeout),
        ("--read-timeout", options.read_timeout),
        ("--turn-timeout", options.turn_timeout),
    ):
        assert f"{flag} (default {default:g} s)" in text
    assert f"retried up to {options.max_retries} times" in text
    assert f"about {options.max_retries + 1} x --timeout per turn" in text
    assert f"within {OpenAIChatClient.check_reachable.__defaults__[0]:g} s" in text
    assert "No client follows an HTTP redirect" in text
