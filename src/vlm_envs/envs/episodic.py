"""The frame the bundled envs share: a typed config and one running episode.

An :class:`EpisodicEnv` takes its config (``config_class``) with keyword overrides at construction,
applies a ``reset``'s ``options`` on top for one episode (:meth:`_configure`), picks its seed by gymnasium's
rule (:meth:`_episode_seed`: an unseeded reset continues from the last seed, which :meth:`episode_seed` tells
a snapshot), and keeps the running
episode in ``_ep``: an object with ``done`` and ``success``, ``None`` before the first ``reset`` and
after ``close``. An env of one's own may use it too; the protocol needs none of it. Where the episode
stands (:mod:`vlm_envs.state_signals`) an env writes from its episode object (:meth:`_state_text`,
:meth:`_distance`); the frame answers ``None`` when there is no episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel

from vlm_envs.envs.config import EpisodeSeeds, overridden
from vlm_envs.protocol import Env, EpisodeFinishedError, Observation, StepInfo, trainer_env_config


class EpisodeState(Protocol):
    """What the frame reads of an env's episode object."""

    done: bool

    @property
    def success(self) -> bool: ...


ConfigT = TypeVar("ConfigT", bound=BaseModel)
EpisodeT = TypeVar("EpisodeT", bound=EpisodeState)
EnvT = TypeVar("EnvT", bound="EpisodicEnv[Any, Any]")


class EpisodicEnv(Env, Generic[ConfigT, EpisodeT]):
    """An env with a ``config_class`` config, overridable per instance and per episode."""

    config_class: ClassVar[type[BaseModel]]

    def __init__(self, config: ConfigT | None = None, **overrides: Any):
        default: Any = self.config_class()
        self.base_config: ConfigT = overridden(config if config is not None else default, overrides)
        self.config: ConfigT = self.base_config
        self._ep: EpisodeT | None = None
        self._seeds = EpisodeSeeds()

    @classmethod
    def from_trainer(cls: type[EnvT], sample: Any = None, args: Any = None, **config: Any) -> EnvT:
        """An env from per-sample ``metadata["env_config"]``, explicit ``config`` (which wins) and the
        trainer's ``args.max_turns``; unknown config keys raise a ``ValueError``. An env package exposes
        it as its ``build_env``."""
        return cls(cls.config_class(**trainer_env_config(sample, args, config)))

    def _configure(self, options: Mapping[str, Any] | None) -> ConfigT:
        """The config of a new episode (the env's own with ``options`` applied), now ``self.config``."""
        self.config = overridden(self.base_config, options)
        return self.config

    def _episode_seed(self, seed: int | None, first: int | None = None) -> int:
        """The seed a ``reset`` plays: ``seed``, else the one after the last (see :class:`EpisodeSeeds`)."""
        return self._seeds.next(seed, first)

    def episode_seed(self) -> int | None:
        """The seed the current episode plays (an unseeded ``reset`` continues from the last one)."""
        return self._seeds.last

    def snapshot_config(self) -> dict[str, Any]:
        """The env's config (before any ``reset`` options, which a snapshot holds apart) as plain JSON."""
        return self.base_config.model_dump(mode="json")

    def _episode(self) -> EpisodeT:
        """The current episode, over or not."""
        if self._ep is None:
            raise EpisodeFinishedError("no episode: call reset() first")
        return self._ep

    def _playing(self) -> EpisodeT:
        """The episode a ``step`` plays: one that is not over."""
        ep = self._ep
        if ep is None or ep.done:
            raise EpisodeFinishedError("the episode is over (or was never started): call reset() first")
        return ep

    def _unfinished(self) -> EpisodeT | None:
        """The episode while it is being played; ``None`` before ``reset``, after ``close`` and once it is
        over (where the oracle has nothing to say)."""
        ep = self._ep
        return None if ep is None or ep.done else ep

    def _binary_step(
        self,
        obs: Observation,
        success: bool,
        truncated: bool,
        metrics: dict[str, float | int | bool],
        info: dict[str, Any],
        *,
        terminated: bool | None = None,
    ) -> tuple[Observation, bool, StepInfo]:
        """What ``step`` returns in an env whose reward is 1.0 on success, else 0.0: ``obs``, whether the
        episode is over, and the step's info (terminated on success unless ``terminated`` says otherwise)."""
        step = StepInfo(
            reward=1.0 if success else 0.0,
            terminated=success if terminated is None else terminated,
            truncated=truncated,
            metrics=metrics,
            info=info,
        )
        return obs, self._episode().done, step

    def state_text(self) -> str | None:
        """The episode's state, exact and complete, as text (:meth:`_state_text`); ``None`` without one."""
        return None if self._ep is None else self._state_text(self._ep)

    def distance_to_goal(self) -> int | None:
        """The turns an optimal player needs from here (:meth:`_distance`); ``None`` without an episode."""
        return None if self._ep is None else self._distance(self._ep)

    def _state_text(self, ep: EpisodeT) -> str | None:
        """The state of ``ep`` as text: everything its future depends on, no turn count, budget or history."""
        return None

    def _distance(self, ep: EpisodeT) -> int | None:
        """The turns an optimal player needs from ``ep``'s state (0 solved, ``UNREACHABLE``, ``None``)."""
        return None

    def episode_reward(self) -> float:
        """1.0 when the episode succeeded, else 0.0."""
        return 1.0 if self._ep is not None and self._ep.success else 0.0

    def close(self) -> None:
        """Drop the episode; calling it twice is fine."""
        self._ep = None
