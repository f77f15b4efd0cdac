"""Faults an env can play: any registered env with one of its rewards broken.

:class:`RewardFaultEnv` wraps an env and plays its episodes unchanged, except for the reward its
fault names (:data:`REWARD_FAULTS`): the episode reward ``inf``, NaN, ``1e308``, ``None``, text, or a
raise; or every step reward NaN or ``inf``. :func:`reward_faults` registers such a variant of each
env under its own name for the length of a ``with`` block, so dataset rows of every trainer can name
it exactly as they name the env itself.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from vlm_envs import registry
from vlm_envs.protocol import Env, Observation, StepInfo

#: What each fault makes the env answer: ``episode_reward()`` returns the value (``raises``: raises);
#: ``step_*`` faults give every step that value as its reward and leave the episode reward alone.
REWARD_FAULTS: Mapping[str, Any] = {
    "inf": math.inf,
    "nan": math.nan,
    "huge": 1e308,
    "none": None,
    "text": "1.0",
    "raises": RuntimeError("the reward model is down"),
    "step_nan": math.nan,
    "step_inf": -math.inf,
}


class RewardFaultEnv(Env):
    """``inner`` with the reward ``fault`` names broken (see :data:`REWARD_FAULTS`)."""

    def __init__(self, inner: Env, fault: str) -> None:
        if fault not in REWARD_FAULTS:
            raise ValueError(f"reward fault must be one of {', '.join(REWARD_FAULTS)}, got {fault!r}")
        self.inner, self.fault = inner, fault
        self.has_episode_reward = inner.has_episode_reward

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        return self.inner.reset(seed=seed, options=options)

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        obs, done, info = self.inner.step(response_text)
        if self.fault.startswith("step_"):
            info = info.model_copy(update={"reward": REWARD_FAULTS[self.fault]})
        return obs, done, info

    def episode_reward(self) -> Any:
        if self.fault.startswith("step_"):
            return self.inner.episode_reward()
        value = REWARD_FAULTS[self.fault]
        if isinstance(value, Exception):
            raise value
        return value

    def system_prompt(self) -> str | None:
        return self.inner.system_prompt()

    def format_observation(self, obs: Observation) -> Any:
        return self.inner.format_observation(obs)

    def oracle_response(self) -> str | None:
        return self.inner.oracle_response()

    def tools(self) -> list[dict[str, Any]]:
        return self.inner.tools()

    def close(self) -> None:
        self.inner.close()


def build_env(
    sample: Any = None, args: Any = None, *, fault_env: str, reward_fault: str, **config: Any
) -> RewardFaultEnv:
    """The registered env ``fault_env`` built as usual, with ``reward_fault`` broken."""
    return RewardFaultEnv(registry.build_env(fault_env, sample=sample, args=args, **config), reward_fault)


def fault_name(env: str, fault: str) -> str:
    """The registered name of ``env``'s variant with ``fault``."""
    return f"{env}-reward-{fault}"


@contextlib.contextmanager
def reward_faults(envs: Iterable[str], faults: Iterable[str] = REWARD_FAULTS) -> Iterator[list[str]]:
    """Register the variant of each of ``envs`` with each of ``faults`` (in this process) for the
    block; yields their names."""
    names = []
    try:
        for env in list(envs):
            for fault in faults:
                name = fault_name(env, fault)
                registry.register(name, __name__, fault_env=env, reward_fault=fault)
                names.append(name)
        yield names
    finally:
        for name in names:
            registry._registered.pop(name, None)
