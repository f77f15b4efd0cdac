"""Where eval episodes play: this process, or Ray actors (``--ray``), behind one interface.

An :class:`EpisodeRunner` plays episode ``index`` and hands back a :class:`FinishedEpisode`: its
``results.jsonl`` record and its frames as PNG bytes, so the driver only writes files (the actors
of a Ray run may be on other machines). The eval runner picks one once from the config; Ray is
imported only for a Ray run (:mod:`vlm_envs.eval.ray_episodes`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Protocol

from vlm_envs.eval.config import EvalConfig, make_env
from vlm_envs.eval.policies import Policy
from vlm_envs.eval.records import EpisodeResult, TurnResult, frame_files, to_record
from vlm_envs.protocol import DEFAULT_MAX_TURNS


@dataclasses.dataclass(frozen=True)
class FinishedEpisode:
    """An episode ready to write: its record, its frames by relative path, its non-finite metrics."""

    index: int
    record: dict[str, Any]
    frames: dict[str, bytes]
    non_finite: dict[str, float]


class EpisodeRunner(Protocol):
    """Plays the run's episodes by index; :meth:`play` never raises for an episode's failure."""

    async def start(self) -> None:
        """Be ready to play; raise :class:`~vlm_envs.eval.policies.PolicyError` if it cannot."""
        ...

    async def play(self, index: int) -> FinishedEpisode: ...

    async def close(self) -> None: ...


async def play_episode(config: EvalConfig, policy: Policy, index: int) -> EpisodeResult:
    """Episode ``index`` (seed ``config.seed + index``, at its ``--difficulty`` level) with a started
    ``policy``; its reset info records the level where the env's does not."""
    seed = config.seed + index
    env = await asyncio.to_thread(make_env, config, index)
    try:
        result = await policy.play(env, seed, config.max_turns or DEFAULT_MAX_TURNS)
    except Exception as err:  # a policy's or env's bug ends this episode as failed, not the run
        return failed_result(config, index, f"{type(err).__name__}: {err}")
    finally:
        env.close()
    return _with_level(result, config, index)


def failed_result(config: EvalConfig, index: int, error: str) -> EpisodeResult:
    """Episode ``index`` ended FAILED before any turn, for ``error``."""
    result = EpisodeResult(
        seed=config.seed + index, status="failed", reward=0.0, turns=[TurnResult(None)], error=error
    )
    return _with_level(result, config, index)


def _with_level(result: EpisodeResult, config: EvalConfig, index: int) -> EpisodeResult:
    """``result`` with its episode's ``--difficulty`` level in its reset info (the summary's per-level
    success reads it there)."""
    levels = config.levels()
    if levels is not None:
        result.reset_info.setdefault("difficulty", levels[index])
    return result


def finish(result: EpisodeResult, index: int, policy_name: str) -> FinishedEpisode:
    """The record and PNG frames of a played episode (CPU work: call it off the event loop)."""
    record = to_record(result, index, None, {"policy": policy_name})
    return FinishedEpisode(index, record, frame_files(result, index), result.non_finite_metrics())


class LocalEpisodes:
    """Episodes on this process's event loop, with the driver's own started policy."""

    def __init__(self, config: EvalConfig, policy: Policy) -> None:
        self.config, self.policy = config, policy

    async def start(self) -> None:
        """Nothing to do: the driver started the policy."""

    async def play(self, index: int) -> FinishedEpisode:
        result = await play_episode(self.config, self.policy, index)
        return await asyncio.to_thread(finish, result, index, self.policy.name)

    async def close(self) -> None:
        """Nothing to do: the driver closes the policy."""
