"""A served env for the fault tests: a reply ``sleep S`` makes its step take S seconds; other replies
and config keys play what a hostile or broken env does (see :class:`SlowEnv`)."""

from __future__ import annotations

import os
import pickle
import signal
import time
from typing import Any

from vlm_envs.protocol import Env, Observation, StepInfo

MIB = 1 << 20
#: What a ``reward`` or ``step_reward`` config names, as the env hands it back.
BROKEN_REWARDS = {"nan": float("nan"), "inf": float("inf"), "none": None, "huge": 1e308, "text": "1.0"}


def _memory(mib: float) -> list[bytes]:
    """``mib`` MiB held in 64 KiB pieces (malloc's heap, not one mapping), every page written."""
    return [b"\x01" * (64 << 10) for _ in range(int(mib * 16))]


class SlowEnv(Env):
    """Ends after ``turns`` steps; each step answers "step N". Replies: ``sleep S`` sleeps first;
    ``block S`` sleeps with every signal blocked (work no signal interrupts); ``open PATH`` opens a
    file (a FIFO blocks); ``hold N`` keeps N MiB more; ``alloc N`` allocates N MiB for the step.
    Config: ``oracle_s`` the oracle's thinking time; ``hold_mib`` kept from reset on;
    ``reward``/``step_reward`` a number or a broken value (:data:`BROKEN_REWARDS`, or ``raise``);
    ``has_reward`` False: no episode reward."""

    def __init__(
        self,
        turns: int = 2,
        hold_mib: float = 0,
        reward: str | None = None,
        step_reward: str | float | None = None,
        has_reward: bool = True,
        oracle_s: float = 0.0,
    ) -> None:
        self.turns = turns
        self.oracle_s = oracle_s
        self.steps = 0
        self.hold_mib = hold_mib
        self.reward = reward
        self.step_reward = step_reward
        self.has_episode_reward = has_reward
        self.held: list[bytes] = []

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        self.steps = 0
        self.held = _memory(self.hold_mib)
        return Observation(text=f"start {seed}"), {}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        word, _, arg = response_text.partition(" ")
        if word == "sleep":
            time.sleep(float(arg))
        elif word == "block":
            blocked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
            try:
                time.sleep(float(arg))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        elif word == "open":
            with open(arg, "rb") as f:
                f.read(1)
        elif word == "hold":
            self.held += _memory(float(arg))
        elif word == "alloc":
            bytearray(int(float(arg) * MIB))
        self.steps += 1
        done = self.steps >= self.turns
        reward = _broken(self.step_reward, 1.0)
        info = StepInfo.model_construct(reward=reward, terminated=done)  # unchecked: a broken env's reward
        return Observation(text=f"step {self.steps}"), done, info

    def episode_reward(self) -> float:
        return _broken(self.reward, float(self.steps))

    def oracle_response(self) -> str:
        """``go``, after thinking for ``oracle_s`` seconds (an oracle's search that runs for minutes)."""
        time.sleep(self.oracle_s)
        return "go"


def _broken(name: str | float | None, otherwise: float) -> Any:
    if name is None:
        return otherwise
    if name == "raise":
        raise ValueError("the reward cannot be computed")
    return BROKEN_REWARDS.get(name, name) if isinstance(name, str) else name


def build_env(sample: Any = None, args: Any = None, **config: Any) -> SlowEnv:
    return SlowEnv(**config)


def worker_that_cannot_start(conn: Any, served: Any, settings: Any) -> None:
    """A serve worker process that ends before it is ready (as one whose imports fail)."""
    raise SystemExit(3)


def worker_that_answers_once_and_exits(sock: Any, served: Any, settings: Any) -> None:
    """A serve worker process that answers its first call (``"last words"``) and ends at once after."""
    from vlm_envs.serve.pipe import BlockingPipe
    from vlm_envs.serve.worker import Answer

    pipe = BlockingPipe(sock)
    pipe.send(pickle.dumps((-1, Answer(200, b"ready"))))
    _, call_id, _, _ = pickle.loads(pipe.recv())
    pipe.send(pickle.dumps((call_id, Answer(200, b"last words"))))
    os._exit(0)
