"""Episodes on the caller's event loop, and the interface every executor offers.

An :class:`EpisodeExecutor` plays an :class:`~vlm_envs.rollout.executors.worker_process.EpisodeJob`
and returns its :class:`~vlm_envs.rollout.trajectory.Trajectory` (``await run(job, should_abort)``;
never raises for env, engine or codec failures), with ``start``, ``close`` and a context manager.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from vlm_envs.registry import build_env
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.engines.contract import Engine
from vlm_envs.rollout.episode import run_episode
from vlm_envs.rollout.executors.worker_process import EpisodeJob
from vlm_envs.rollout.offload import rollout_executor
from vlm_envs.rollout.trajectory import Trajectory


class EpisodeExecutor(Protocol):
    """Plays episodes somewhere; what the slime hook, eval and benchmarks talk to."""

    def start(self) -> None: ...

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory: ...

    def close(self) -> None: ...

    def __enter__(self) -> EpisodeExecutor: ...

    def __exit__(self, *exc: object) -> None: ...


class InProcessEpisodes:
    """Plays episodes on the caller's event loop with ``codec`` and the engine ``make_engine`` returns.

    The engine is the caller's (an HTTP engine's session belongs to an event loop, so its owner
    closes it there); ``make_engine`` is called once, at the first :meth:`run`.
    """

    def __init__(self, codec: ChatCodec, make_engine: Callable[[], Engine], *, args: Any = None) -> None:
        self.codec = codec
        self.args = args
        self._make_engine = make_engine
        self._engine: Engine | None = None

    def start(self) -> None:
        if self._engine is None:
            self._engine = self._make_engine()

    async def run(self, job: EpisodeJob, should_abort: Callable[[], bool] | None = None) -> Trajectory:
        """Play ``job`` here; never raises for env, engine or codec failures."""
        try:
            self.start()
            env = build_env(job.env, sample=job.sample, args=self.args, **job.env_config)
        except Exception as err:  # an unknown env, a bad config or no engine fails this episode only
            return Trajectory.failed(f"env: {type(err).__name__}: {err}", job.config.failure_reward)
        try:
            traj = await run_episode(
                env,
                self._engine,
                self.codec,
                seed=job.seed,
                config=job.config,
                sampling_params=job.sampling_params,
                should_abort=should_abort,
                fallback_prompt=job.fallback_prompt,
                resume=job.resume,
            )
        finally:
            with contextlib.suppress(Exception):  # an env that fails to close must not lose the episode
                env.close()
        try:  # the training tensors and texts, made off the caller's loop
            await asyncio.get_running_loop().run_in_executor(rollout_executor(), traj.prepare, self.codec)
        except Exception as err:  # e.g. out of memory: the episode fails, the caller goes on
            return Trajectory.failed(f"training data: {type(err).__name__}: {err}", job.config.failure_reward)
        return traj

    def close(self) -> None:
        self._engine = None

    def __enter__(self) -> InProcessEpisodes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
