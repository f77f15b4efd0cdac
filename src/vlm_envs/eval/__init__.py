"""Evaluating a policy on an env: policies, the resumable runner, records and the summary.

The scripted and ``openai:`` policies need no torch; ``sglang:`` needs the ``rollout`` extra.
"""

from vlm_envs.eval.policies import Policy, PolicyError, PolicyOptions
from vlm_envs.eval.policy_kinds import POLICY_KINDS, build_policy
from vlm_envs.eval.records import EpisodeResult, TurnResult
from vlm_envs.eval.runner import EvalConfig, EvalError, run_eval
from vlm_envs.eval.summary import summarize, wilson_interval

__all__ = [
    "POLICY_KINDS",
    "EpisodeResult",
    "EvalConfig",
    "EvalError",
    "Policy",
    "PolicyError",
    "PolicyOptions",
    "TurnResult",
    "build_policy",
    "run_eval",
    "summarize",
    "wilson_interval",
]
