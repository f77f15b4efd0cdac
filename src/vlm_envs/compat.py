"""slime-shaped envs behind the typed protocol.

slime's example interaction envs are duck-typed: ``reset()`` returns ``(obs_dict, info)`` (``{}``
when "the question lives in the prompt"), ``step(text)`` returns ``(obs_dict, done, info)`` with
``obs_str``, ``role`` and ``multi_modal_data``, ``format_observation(obs_dict)`` (a method, or a
function of the env's module) builds the chat message, and there is no episode reward: slime's
own reward model (``--custom-rm-path`` / ``--rm-type``) scores the sample. :class:`SlimeEnvAdapter`
wraps such an env so every part of vlm-envs (the hooks, eval, play, ``check_env``) runs it as an
:class:`~vlm_envs.protocol.Env`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from PIL import Image

from vlm_envs.protocol import (
    IMAGE_PLACEHOLDER,
    ChatMessage,
    Env,
    EpisodeFinishedError,
    MetricValue,
    Observation,
    StepInfo,
)


def is_slime_shaped(obj: Any) -> bool:
    """Whether ``obj`` looks like a slime interaction env: callable ``reset`` and ``step``."""
    return callable(getattr(obj, "reset", None)) and callable(getattr(obj, "step", None))


class SlimeEnvAdapter(Env):
    """A slime-shaped env as an :class:`Env`.

    Observations come through :meth:`Observation.from_dict` (images under any key of
    ``multi_modal_data``, in order; file paths are opened); a step's finite scalar info entries
    become metrics, everything else stays in ``info``; a numeric ``info["reward"]`` is also the step
    reward. ``reset``'s seed reaches the env only if its ``reset`` takes one. The env has no episode
    reward (:attr:`has_episode_reward` is false): :meth:`episode_reward` answers 0.0, and the slime
    hook leaves ``sample.reward`` to slime's reward model.
    """

    #: This env does not score its episodes; a trainer's own reward model does.
    has_episode_reward: ClassVar[bool] = False

    def __init__(self, inner: Any, module: ModuleType | None = None) -> None:
        self.inner = inner
        self.description = (type(inner).__doc__ or "").strip().split("\n")[0]
        method = getattr(inner, "format_observation", None)
        function = getattr(module, "format_observation", None) if module is not None else None
        self._format = method if callable(method) else function if callable(function) else None
        self._reset_takes_seed = _accepts(inner.reset, "seed")
        self._last: tuple[Observation, Mapping[str, Any]] | None = None
        self._done = True

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        out = self.inner.reset(seed=seed) if self._reset_takes_seed else self.inner.reset()
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping | None):
            raw, info = out
        else:  # some envs return the observation alone
            raw, info = out, {}
        self._done = False
        return self._observation(raw), dict(info or {})

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if self._done:
            raise EpisodeFinishedError("the episode is over; call reset() first")
        out = self.inner.step(response_text)
        if not (isinstance(out, tuple) and len(out) == 3):
            raise TypeError(f"a slime env's step() must return (obs, done, info), got {type(out).__name__}")
        raw, done, info = out
        self._done = bool(done)
        metrics, rest = _split_info(info)
        reward = metrics.get("reward", 0.0)
        step = StepInfo(reward=float(reward), terminated=self._done, metrics=metrics, info=rest)
        return self._observation(raw), self._done, step

    def format_observation(self, obs: Observation) -> ChatMessage:
        if self._format is None:
            return super().format_observation(obs)
        raw = self._last[1] if self._last is not None and self._last[0] is obs else obs.to_dict()
        return self._format(dict(raw))

    def episode_reward(self) -> float:
        """0.0: a slime env has no episode reward (see :attr:`has_episode_reward`)."""
        return 0.0

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()

    def _observation(self, raw: Any) -> Observation:
        if isinstance(raw, Observation):
            return raw
        raw = dict(raw or {})
        images = [_image(im) for ims in (raw.get("multi_modal_data") or {}).values() for im in ims or ()]
        data = {"obs_str": str(raw.get("obs_str") or ""), "multi_modal_data": {IMAGE_PLACEHOLDER: images}}
        role = raw.get("role")
        if not role and self._format is not None:  # the role their message gives an observation without one
            role = (self._format(dict(raw)) or {}).get("role")
        if role in ("user", "tool"):
            data["role"] = role
        obs = Observation.from_dict(data)
        self._last = (obs, raw)
        return obs


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _image(item: Any) -> Image.Image:
    """A PIL image from an observation's image item (a PIL image or a local file path)."""
    if isinstance(item, Image.Image):
        return item
    if isinstance(item, str | Path):
        with Image.open(item) as im:
            return im.convert("RGB")
    raise TypeError(f"an observation image must be a PIL image or a file path, got {type(item).__name__}")


def _split_info(info: Any) -> tuple[dict[str, MetricValue], dict[str, Any]]:
    """Finite int/float/bool entries (metrics) and the rest (info)."""
    metrics: dict[str, MetricValue] = {}
    rest: dict[str, Any] = {}
    for key, value in dict(info or {}).items():
        (metrics if _finite_scalar(value) else rest)[str(key)] = value
    return metrics, rest


def _finite_scalar(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    try:
        return isinstance(value, int | float) and math.isfinite(float(value))
    except OverflowError:  # an int too large for a float
        return False
