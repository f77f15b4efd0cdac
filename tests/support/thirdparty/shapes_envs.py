"""Count the shapes in a picture: the worked example of docs/writing_an_env.md.

A third-party env package as the guide describes it: an ``Env`` subclass whose observations are
built with ``Observation.compose`` (model text is never read for image placeholders), every random
choice drawn from the reset seed, ``options`` that pick the episode, ``random_response`` and
``oracle_response``, and a module-level ``build_env`` that reads per-sample config.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from vlm_envs import Env, EpisodeFinishedError, Observation, StepInfo
from vlm_envs.protocol import args_max_turns, resolve_env_config

ANSWER_RE = re.compile(r"<answer>\s*(\d{1,3})\s*</answer>")
#: Replies longer than this are not parsed (model text is hostile input; bound the work).
MAX_REPLY_CHARS = 10_000


class ShapesEnv(Env):
    """Count the shapes in a picture; a wrong count shows the picture again."""

    def __init__(self, size: int = 96, max_shapes: int = 6, max_turns: int = 3):
        if not 1 <= max_shapes <= 20:
            raise ValueError(f"max_shapes must be in 1..20, got {max_shapes}")
        self.size, self.max_shapes, self.max_turns = size, max_shapes, max_turns
        self._count, self._turn, self._done, self._solved = 0, 0, True, False
        self._picture: Image.Image | None = None

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        rng = np.random.default_rng(seed)  # seed None: a fresh episode; any int in [0, 2**64) works
        count = (options or {}).get("count")
        self._count = int(count) if count is not None else int(rng.integers(1, self.max_shapes + 1))
        self._picture = self._draw(rng)
        self._turn, self._done, self._solved = 0, False, False
        obs = Observation.compose(
            "How many shapes are in this picture?\n", self._picture, "\nReply <answer>N</answer>."
        )
        return obs, {"count": self._count}

    def _draw(self, rng: np.random.Generator) -> Image.Image:
        picture = Image.new("RGB", (self.size, self.size), "white")
        draw = ImageDraw.Draw(picture)
        cell = self.size // 5
        for index in rng.permutation(25)[: self._count]:
            x, y = int(index % 5) * cell, int(index // 5) * cell
            draw.ellipse((x + 2, y + 2, x + cell - 2, y + cell - 2), fill=(40, 80, 220))
        return picture

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if self._done:
            raise EpisodeFinishedError("the episode is over; call reset()")
        self._turn += 1
        match = ANSWER_RE.search(response_text[:MAX_REPLY_CHARS])
        guess = int(match.group(1)) if match else None
        self._solved = guess == self._count
        self._done = self._solved or self._turn >= self.max_turns
        info = StepInfo(
            reward=float(self._solved),
            terminated=self._solved,
            truncated=self._done and not self._solved,
            metrics={"format_valid": guess is not None, "success": self._solved},
        )
        if self._solved:
            return Observation(text="Correct."), True, info
        feedback = "No <answer>N</answer> found." if guess is None else f"Not {guess}. Look again:"
        assert self._picture is not None
        return Observation.compose(feedback, "\n", self._picture), self._done, info

    def episode_reward(self) -> float:
        return float(self._solved)

    def random_response(self, rng: random.Random) -> str:
        return f"<answer>{rng.randint(1, self.max_shapes)}</answer>"

    def oracle_response(self) -> str | None:
        return None if self._done else f"<answer>{self._count}</answer>"


def build_env(sample: Any = None, args: Any = None, **config: Any) -> ShapesEnv:
    """The env for a dataset row or slime Sample (``metadata["env_config"]``), explicit config and
    the trainer's ``args.max_turns``."""
    config = resolve_env_config(sample, config)
    max_turns = args_max_turns(args)
    if max_turns is not None:
        config.setdefault("max_turns", max_turns)
    return ShapesEnv(**config)
