"""gymnasium adapter: every registered env as ``gymnasium.make("vlm_envs/<Name>-v0", **config)``.

Importing :mod:`vlm_envs` registers the ids (or use ``gymnasium.make("vlm_envs:vlm_envs/Sokoban-v0")``
without importing first). Actions are response strings; observations are dicts with the text, the
role and the images as ``uint8`` arrays of shape (H, W, 3); ``step`` returns gymnasium's 5-tuple. Every
id has a step limit (:data:`MAX_EPISODE_STEPS`). The ``info`` of ``reset`` and ``step`` says where the
episode stands after it (:mod:`vlm_envs.state_signals`): ``state_key`` and ``distance_to_goal``
(``None`` where the env does not say); ``reset``'s holds the env's reset info beside them, ``step``'s
``metrics`` and the step's own info.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium import spaces

from vlm_envs.protocol import Env, Observation
from vlm_envs.registry import EnvSpec, build_env, list_envs
from vlm_envs.state_signals import standing_of

MAX_RESPONSE_CHARS = 1 << 20
#: What every gymnasium id of ours makes: a :class:`GymEnv` of the env it names.
GYM_ENTRY_POINT = "vlm_envs.gym:GymEnv"
#: The step limit of every id (gymnasium's ``TimeLimit`` truncates there): a backstop that ends any loop,
#: above the bundled envs' own turn caps (100 replies or fewer by default); ``gymnasium.make(id,
#: max_episode_steps=N)`` sets another.
MAX_EPISODE_STEPS = 1000


class TextSpace(spaces.Space[str]):
    """Any string up to ``max_length`` characters (gymnasium's ``Text`` restricts the charset)."""

    def __init__(self, max_length: int = MAX_RESPONSE_CHARS, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, 32))
        return "".join(chr(int(c)) for c in self.np_random.integers(32, 127, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"TextSpace(max_length={self.max_length})"


class ImageListSpace(spaces.Space[tuple]):
    """A tuple of RGB ``uint8`` images of any size, shape (H, W, 3) each."""

    def __init__(self, seed: int | None = None):
        super().__init__(shape=None, dtype=np.uint8, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> tuple:
        h, w = (int(v) for v in self.np_random.integers(1, 64, size=2))
        return (self.np_random.integers(0, 256, size=(h, w, 3), dtype=np.uint8),)

    def contains(self, x: Any) -> bool:
        return isinstance(x, tuple) and all(
            isinstance(im, np.ndarray) and im.dtype == np.uint8 and im.ndim == 3 and im.shape[2] == 3
            for im in x
        )

    def __repr__(self) -> str:
        return "ImageListSpace()"


def observation_to_gym(obs: Observation) -> dict[str, Any]:
    """A protocol observation as a gymnasium observation dict."""
    return {
        "text": obs.text,
        "role": obs.role,
        "images": tuple(np.asarray(im.convert("RGB")) for im in obs.images),
    }


class GymEnv(gymnasium.Env):
    """Wraps a vlm-envs :class:`Env`; the protocol env stays reachable as ``.vlm_env``."""

    #: ``render_fps``: one frame a turn, shown a second each (what gymnasium's video recorder plays at).
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 1}

    def __init__(self, env: str, render_mode: str | None = None, **config: Any):
        self.vlm_env: Env = build_env(env, **config)
        self.render_mode = render_mode
        self.action_space = TextSpace()
        self.observation_space = spaces.Dict(
            {"text": TextSpace(), "role": TextSpace(max_length=8), "images": ImageListSpace()}
        )
        self._last: Observation | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._last, info = self.vlm_env.reset(seed=seed, options=options)
        return observation_to_gym(self._last), {**info, **self._standing()}

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self._last, done, step_info = self.vlm_env.step(action)
        truncated = step_info.truncated
        terminated = step_info.terminated or (done and not truncated)
        info = {"metrics": step_info.metrics, **step_info.info, **self._standing()}
        return observation_to_gym(self._last), step_info.reward, terminated, truncated, info

    def _standing(self) -> dict[str, Any]:
        """Where the episode stands now, as ``info`` keys (checked by :func:`standing_of`)."""
        standing = standing_of(self.vlm_env)
        return {"state_key": standing.key, "distance_to_goal": standing.distance}

    def render(self) -> np.ndarray | None:
        """The last observation's last image (``render_mode="rgb_array"``)."""
        if self.render_mode != "rgb_array" or self._last is None or not self._last.images:
            return None
        return np.asarray(self._last.images[-1].convert("RGB"))

    def close(self) -> None:
        self.vlm_env.close()


def register_gym_env(spec: EnvSpec) -> None:
    """Make ``spec`` reachable through ``gymnasium.make(spec.gym_id)``."""
    kwargs = {"env": spec.name}
    known = gymnasium.registry.get(spec.gym_id)
    if (
        known is not None
        and known.entry_point == GYM_ENTRY_POINT
        and known.kwargs == kwargs
        and known.max_episode_steps == MAX_EPISODE_STEPS
    ):
        return  # already there: the id names our env, whose spec is looked up at make()
    gymnasium.register(
        id=spec.gym_id,
        entry_point=GYM_ENTRY_POINT,
        kwargs=kwargs,
        max_episode_steps=MAX_EPISODE_STEPS,
        disable_env_checker=True,  # gymnasium's checker expects array observations; ours is check_env
    )


def register_gym_envs() -> None:
    """Register every env known now (entry points and run-time registrations)."""
    for spec in list_envs():
        if spec.gym_id not in gymnasium.registry:
            register_gym_env(spec)
