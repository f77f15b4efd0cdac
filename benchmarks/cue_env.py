"""A small learnable env for ``benchmarks/trl_learning.py``: every turn shows a colour, and the reply
names the direction that colour stands for.

The first prompt says the code (red: Up, green: Down, blue: Left, yellow: Right); each turn's picture
is a solid square of one colour, drawn by the seed. The reply's first direction word is its answer.
Episode reward: the share of turns answered right; ``success``: every turn right (a player that
guesses among the four words wins 1 in 4**turns). ``benchmarks/trl_learning.py`` registers it as
``cue`` (a TRL row names registered envs only); slime also loads it by path
(``build_env("benchmarks/cue_env.py")``).
"""

from __future__ import annotations

import random
import re
from typing import Any

from PIL import Image

from vlm_envs import Env, EpisodeFinishedError, Observation, StepInfo
from vlm_envs.protocol import args_max_turns, resolve_env_config

#: Each colour's direction and pixel value.
CUES = {
    "red": ("Up", (220, 40, 40)),
    "green": ("Down", (40, 180, 60)),
    "blue": ("Left", (40, 80, 220)),
    "yellow": ("Right", (230, 210, 40)),
}
WORD = re.compile(r"\b(Up|Down|Left|Right)\b")
INTRO = (
    "Each picture shows a colour. Reply with one word: "
    "red is Up, green is Down, blue is Left, yellow is Right.\n"
)


class CueEnv(Env):
    """Name the direction each turn's colour stands for."""

    def __init__(self, turns: int = 2, size: int = 56) -> None:
        self.turns, self.size = turns, size
        self._cues: list[str] = []
        self._turn = self._right = 0

    def _picture(self) -> Image.Image:
        return Image.new("RGB", (self.size, self.size), CUES[self._cues[self._turn]][1])

    def reset(self, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        rng = random.Random(seed)
        self._cues = [rng.choice(sorted(CUES)) for _ in range(self.turns)]
        self._turn = self._right = 0
        return Observation.compose(INTRO, self._picture()), {"cues": list(self._cues)}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        if self._turn >= self.turns:
            raise EpisodeFinishedError("the episode is over; call reset()")
        match = WORD.search(response_text)
        right = match is not None and match.group(1) == CUES[self._cues[self._turn]][0]
        self._right += right
        self._turn += 1
        done = self._turn >= self.turns
        metrics = {
            "format_valid": match is not None,
            "right": right,
            "success": done and self._right == self.turns,
        }
        info = StepInfo(reward=float(right), terminated=done, metrics=metrics)
        feedback = "Right." if right else "Wrong."
        if done:
            return Observation(text=feedback), True, info
        return Observation.compose(feedback + " Next:", self._picture()), False, info

    def episode_reward(self) -> float:
        return self._right / self.turns

    def oracle_response(self) -> str | None:
        return CUES[self._cues[self._turn]][0] if self._turn < self.turns else None

    def random_response(self, rng: random.Random) -> str:
        return rng.choice([word for word, _ in CUES.values()])


def build_env(sample: Any = None, args: Any = None, **config: Any) -> CueEnv:
    """The module-level factory (``turns`` defaults to the trainer's ``max_turns``, else 2)."""
    config = resolve_env_config(sample, config)
    config.pop("max_turns", None)
    turns = args_max_turns(args)
    if turns is not None:
        config.setdefault("turns", turns)
    return CueEnv(**config)
