"""OpenEnv's own server hosting the Sokoban env that serve_load.py also serves with ``vlm-envs serve``.

A thin OpenEnv ``Environment`` around ``build_env("sokoban", **CONFIG)``, served by OpenEnv 0.10's
``create_app`` (FastAPI): ``python -m uvicorn openenv_sokoban:app --app-dir benchmarks [--workers 2]``.
Its observation carries what ours does, built by the same code (:func:`vlm_envs.serve.wire.reply_body`'s
fields: the text, each image as a base64 PNG from the same encoder, the slots, the role, and the step's
status, metrics, info and rewards in the metadata), so the two servers do the same env work per step
and differ only in how they host it. Sessions: ``OPENENV_MAX_SESSIONS`` (default 4096), each a WebSocket
with its own env, as OpenEnv runs them (a thread of its own per session).
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Literal

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field

from vlm_envs import build_env
from vlm_envs.plain_json import json_safe
from vlm_envs.serve.wire import observation_fields

#: The env both servers host (serve_load.py's sessions reset it with this config).
CONFIG = {"grid_size": [6, 6], "num_boxes": 1, "render_mode": "vision"}


class ReplyAction(Action):
    """The model's whole reply, as ``vlm-envs serve`` takes it."""

    text: str


class SokobanObservation(Observation):
    """``vlm-envs serve``'s observation fields (images: base64 PNGs)."""

    text: str = ""
    images: list[str] = Field(default_factory=list)
    image_modes: list[str] = Field(default_factory=list)
    image_slots: list[int] = Field(default_factory=list)
    role: Literal["user", "tool"] = "user"


class SokobanEnvironment(Environment):
    """One session's Sokoban env, reset by seed; ``env`` and ``config`` in a reset are ours (ignored)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self.env = build_env("sokoban", **CONFIG)
        self.episode = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        obs, info = self.env.reset(seed)
        self.episode = State(episode_id=episode_id or uuid.uuid4().hex, step_count=0)
        return self._observation(
            obs, None, {"reset_info": json_safe(info), "episode_id": self.episode.episode_id}
        )

    def step(self, action: ReplyAction, timeout_s: float | None = None, **kwargs: Any) -> Observation:  # type: ignore[override]
        obs, done, info = self.env.step(action.text)
        self.episode.step_count += 1
        extra = {"episode_id": self.episode.episode_id, "step": self.episode.step_count}
        return self._observation(obs, info, extra, done=done, reward=info.reward)

    @property
    def state(self) -> State:
        return self.episode

    def _observation(
        self, obs: Any, info: Any, extra: dict[str, Any], done: bool = False, reward: float | None = None
    ) -> SokobanObservation:
        terminated, truncated = bool(info and info.terminated), bool(info and info.truncated)
        metadata = {
            "status": "terminated" if terminated else "truncated" if truncated else "running",
            "terminated": terminated,
            "truncated": truncated,
            "metrics": json_safe(info.metrics) if info else {},
            "info": json_safe(info.info) if info else {},
            "episode_reward": self.env.episode_reward(),
            **extra,
        }
        fields = observation_fields(obs, metadata)
        return SokobanObservation(**fields, done=bool(done), reward=reward)


app = create_app(
    SokobanEnvironment,
    ReplyAction,
    SokobanObservation,
    env_name="sokoban",
    max_concurrent_envs=int(os.environ.get("OPENENV_MAX_SESSIONS", "4096")),
)
