"""A served env for the fault tests: a reply ``sleep S`` makes its step take S seconds."""

from __future__ import annotations

import time
from typing import Any

from vlm_envs.protocol import Env, Observation, StepInfo


class SlowEnv(Env):
    """Ends after ``turns`` steps; each step answers "step N"; ``sleep S`` sleeps first."""

    def __init__(self, turns: int = 2) -> None:
        self.turns = turns
        self.steps = 0

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.steps = 0
        return Observation(text=f"start {seed}"), {}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if response_text.startswith("sleep "):
            time.sleep(float(response_text.split()[1]))
        self.steps += 1
        done = self.steps >= self.turns
        return Observation(text=f"step {self.steps}"), done, StepInfo(reward=1.0, terminated=done)

    def episode_reward(self) -> float:
        return float(self.steps)


def build_env(sample: Any = None, args: Any = None, **config: Any) -> SlowEnv:
    return SlowEnv(**config)


def worker_that_cannot_start(conn: Any, served: Any) -> None:
    """A serve worker process that ends before it is ready (as one whose imports fail)."""
    raise SystemExit(3)
