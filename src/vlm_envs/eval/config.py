"""What one ``vlm-envs eval`` run is: :class:`EvalConfig`, where its episodes play, and its envs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vlm_envs.configured import build_configured_env
from vlm_envs.datasets.curriculum import LevelPlan, curriculum_plan
from vlm_envs.eval.policies import PolicyOptions
from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import Env


@dataclasses.dataclass(frozen=True)
class RayPlacement:
    """Episodes on ``actors`` Ray actors of ``actor_cpus`` CPUs each, spread over the cluster.

    ``actors=None``: as many as the cluster's CPUs hold. The run joins the cluster this process is
    connected to, else ``address``, else starts a local one (``ray.init()``), as
    :class:`~vlm_envs.rollout.executors.ray_workers.RayEpisodeWorkers` does.
    """

    actors: int | None = None
    address: str | None = None
    actor_cpus: float = 1.0


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Everything one ``vlm-envs eval`` run needs."""

    env: str
    policy: str
    n: int
    out: Path
    seed: int = 0
    concurrency: int = 8
    max_turns: int | None = None
    resume: bool = False
    report: str = "self-contained"  # or "linked" (see vlm_envs.report.REPORT_MODES)
    env_config: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    options: PolicyOptions = dataclasses.field(default_factory=PolicyOptions)
    #: ``None``: episodes play in this process; else on Ray actors (``--ray``).
    ray: RayPlacement | None = None
    #: ``--difficulty``: each episode's level, one level or a curriculum
    #: (:mod:`vlm_envs.datasets.curriculum`).
    difficulty: str | None = None

    def levels(self) -> LevelPlan | None:
        """Each episode's level (``--difficulty``), ``None`` without one; ``ValueError`` for a bad spec."""
        return curriculum_plan(self.difficulty, self.n, self.seed, self.env_config)

    def episode_env_config(self, index: int) -> dict[str, Any]:
        """Episode ``index``'s env config: ``env_config`` with its ``--difficulty`` level."""
        levels = self.levels()
        return dict(self.env_config) if levels is None else {**self.env_config, "difficulty": levels[index]}

    def run_info(self) -> dict[str, Any]:
        """What ``run.json`` records."""
        info = {
            "env": self.env,
            "policy": self.policy,
            "n": self.n,
            "seed": self.seed,
            "max_turns": self.max_turns,
            "env_config": dict(self.env_config),
            "model": self.options.model,
        }
        if self.options.base_urls:  # absent for one server, as in runs written before --base-url
            info["base_urls"] = list(self.options.base_urls)
        if self.difficulty is not None:  # absent without one, as in runs written before --difficulty
            info["difficulty"] = self.difficulty
        return json_safe(info)


def make_env(config: EvalConfig, index: int = 0) -> Env:
    """Episode ``index``'s env as the run builds it, at its level (see :func:`build_configured_env`)."""
    return build_configured_env(config.env, config.max_turns, config.episode_env_config(index))
