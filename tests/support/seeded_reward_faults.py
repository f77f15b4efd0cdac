"""An env (a module file, so a served worker or a ``vf-eval`` process loads it by path) whose reward
fault is picked by the seed: seed ``k`` plays ``fault_env`` with :data:`FAULTS` ``[k % len(FAULTS)]``
broken (:class:`vlm_envs.testing.env_faults.RewardFaultEnv`), seed 0 unchanged."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vlm_envs import registry
from vlm_envs.protocol import Observation
from vlm_envs.testing.env_faults import RewardFaultEnv

#: The fault each seed plays, in turn ("": none).
FAULTS = ("", "nan", "inf", "huge", "none", "raises", "step_nan")


class SeededRewardFaults(RewardFaultEnv):
    """``inner`` with the reward fault of each episode's seed."""

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        self.fault = FAULTS[(seed or 0) % len(FAULTS)]
        return super().reset(seed=seed, options=options)

    def episode_reward(self) -> Any:
        return super().episode_reward() if self.fault else self.inner.episode_reward()


def build_env(sample: Any = None, args: Any = None, *, fault_env: str = "sokoban", **config: Any) -> Any:
    """``fault_env`` built as usual, its rewards broken by seed."""
    return SeededRewardFaults(registry.build_env(fault_env, sample=sample, args=args, **config), "nan")
