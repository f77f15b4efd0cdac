"""Third-party-style envs for the eval tests: one draws its task from ``random.Random(seed)``, one breaks.

``GuessEnv`` is the shape that exposed a random baseline seeded like the env: its target and its
``random_response`` both come from ``random.Random``, so a policy rng equal to ``Random(seed)`` draws
the answer every time.
"""

from __future__ import annotations

import random
import time
from typing import Any

from vlm_envs import Env, Observation, StepInfo

CHOICES = 3


class GuessEnv(Env):
    """Guess a number in ``0..2`` in one reply: success 1/3 for a blind guess."""

    def __init__(self) -> None:
        self._target = -1
        self._solved = False

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[Observation, dict[str, Any]]:
        self._target = random.Random(seed).randrange(CHOICES)
        self._solved = False
        return Observation(text=f"Guess a number from 0 to {CHOICES - 1}."), {}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        self._solved = response_text.strip() == str(self._target)
        info = StepInfo(reward=float(self._solved), terminated=True, metrics={"success": self._solved})
        return Observation(text="Right." if self._solved else "Wrong."), True, info

    def episode_reward(self) -> float:
        return float(self._solved)

    def random_response(self, rng: random.Random) -> str:
        return str(rng.randrange(CHOICES))


class CrashingEnv(GuessEnv):
    """Resets fine and raises on every reply (with ``odd_only``, on odd seeds only): those episodes FAIL."""

    def __init__(self, odd_only: bool = False) -> None:
        super().__init__()
        self.odd_only = odd_only
        self._seed: int | None = None

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[Observation, dict[str, Any]]:
        self._seed = seed
        return super().reset(seed)

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if not self.odd_only or (self._seed or 0) % 2:
            raise RuntimeError(f"the grader is down (seed {self._seed})")
        return super().step(response_text)


class SlowGuessEnv(GuessEnv):
    """:class:`GuessEnv` that takes 50 ms per reply, so a run lasts long enough to be caught mid-way."""

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        time.sleep(0.05)
        return super().step(response_text)
