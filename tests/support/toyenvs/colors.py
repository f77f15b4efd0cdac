"""A small third-party-style env used by the foundation tests: name the colour of the square."""

from __future__ import annotations

import random
import re
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs import Env, EpisodeFinishedError, Observation, StepInfo
from vlm_envs.state_signals import answer_distance

COLORS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 80, 220), "yellow": (230, 210, 40)}
ANSWER_RE = re.compile(r"<answer>(.{0,64}?)</answer>", re.IGNORECASE | re.DOTALL)


class ColorsEnv(Env):
    """Name the colour of the square in the picture."""

    def __init__(self, size: int = 56, max_turns: int = 3):
        self.size = size
        self.max_turns = max_turns
        self._color = ""
        self._turn = 0
        self._done = True
        self._solved = False
        self._corner = (0, 0)

    def _image(self, rng: np.random.Generator) -> Image.Image:
        pixels = np.full((self.size, self.size, 3), 255, dtype=np.uint8)
        x, y = self._corner = tuple(int(v) for v in rng.integers(0, self.size // 2, size=2))
        pixels[y : y + self.size // 2, x : x + self.size // 2] = COLORS[self._color]
        return Image.fromarray(pixels)

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        rng = np.random.default_rng(seed)
        self._color = sorted(COLORS)[int(rng.integers(len(COLORS)))]
        self._turn, self._done, self._solved = 0, False, False
        text = "What colour is the square? <image> Reply with <answer>colour</answer>."
        return Observation(text=text, images=[self._image(rng)]), {"color": self._color}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if self._done:
            raise EpisodeFinishedError("the episode is over; call reset()")
        self._turn += 1
        match = ANSWER_RE.search(response_text)
        guess = match.group(1).strip().lower() if match else None
        self._solved = guess == self._color
        self._done = self._solved or self._turn >= self.max_turns
        if guess is None:
            feedback = "No <answer>...</answer> found."
        else:
            feedback = "Correct." if self._solved else "Wrong colour, try again."
        info = StepInfo(
            reward=float(self._solved),
            terminated=self._solved,
            truncated=self._done and not self._solved,
            metrics={"format_valid": guess is not None, "success": self._solved},
        )
        return Observation(text=feedback), self._done, info

    def episode_reward(self) -> float:
        return float(self._solved)

    def random_response(self, rng: random.Random) -> str:
        return f"<answer>{rng.choice(sorted(COLORS))}</answer>"


class StatedColorsEnv(ColorsEnv):
    """:class:`ColorsEnv` that says where its episode stands, with an oracle that names the colour."""

    def state_text(self) -> str | None:
        if not self._color:
            return None
        return f"Square: {self._color} at {list(self._corner)}\nSolved: {'yes' if self._solved else 'no'}"

    def distance_to_goal(self) -> int | None:
        return answer_distance(self._solved, lost=False) if self._color else None

    def oracle_response(self) -> str | None:
        return None if self._done else f"<answer>{self._color}</answer>"


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ColorsEnv:
    """Module-level factory, the form slime's env path loads."""
    from vlm_envs.protocol import args_max_turns, resolve_env_config

    config = resolve_env_config(sample, config)
    max_turns = args_max_turns(args)
    if max_turns is not None:
        config.setdefault("max_turns", max_turns)
    return ColorsEnv(**config)
