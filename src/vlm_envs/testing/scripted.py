"""An engine that answers from a script: no model, a fixed latency, picklable for worker processes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from vlm_envs.rollout.engines.contract import EngineOutput


class ScriptedEngine:
    """Answers a request of n input ids with ``answers[n % len(answers)]`` after ``latency`` seconds.

    The choice depends only on the request, so an episode gets the same answers in any process and
    however episodes interleave. Each answer is a list of token ids (end it with the end-of-turn id
    for a finished turn), cut to ``max_new_tokens``; every token's log prob is ``log_prob``. Stands
    in for an inference server where the model's output does not matter: overhead benchmarks, and
    tests of what surrounds it.
    """

    def __init__(
        self, answers: Sequence[Sequence[int]], latency: float = 0.0, log_prob: float = -0.5
    ) -> None:
        if not answers:
            raise ValueError("give at least one answer")
        self.answers = [list(a) for a in answers]
        self.latency = latency
        self.log_prob = log_prob
        self.calls = 0

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[Any], sampling_params: Any
    ) -> EngineOutput:
        if self.latency:
            await asyncio.sleep(self.latency)
        ids = self.answers[len(input_ids) % len(self.answers)]
        self.calls += 1
        limit = sampling_params.get("max_new_tokens", len(ids))
        finish = "stop" if len(ids) <= limit else "length"  # as an engine does: never more than asked
        ids = ids[:limit]
        return EngineOutput(token_ids=ids, log_probs=[self.log_prob] * len(ids), finish_reason=finish)
