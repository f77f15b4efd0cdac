"""The ImageProbe env: is every turn's image reaching the model (and the loss)?

Each turn shows one image, a square of one colour drawn from the seed, and asks which option (a
letter) names that colour. The text never says which colour is shown: the right answer of a turn
depends only on that turn's image. A policy that never sees the images after the first turn cannot
beat chance (``1 / choices``) on the later turns: ``later_accuracy`` tells the two apart. The
episode asks ``questions`` questions (truncated after ``max_turns`` replies); the reward is the
fraction of the questions answered right.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.answers import answer_block
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.image_probe.config import COLORS, ImageProbeConfig
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE

_FIRST_WORD = re.compile(r"\s*([A-Za-z]+)")


#: How far each channel of an image may stray from its colour (seeded), so episodes differ in pixels.
JITTER = 12


@dataclasses.dataclass
class _Episode:
    colors: list[int]
    shades: list[tuple[int, int, int]]
    answers: list[bool] = dataclasses.field(default_factory=list)
    done: bool = False

    @property
    def success(self) -> bool:
        return len(self.answers) == len(self.colors) and all(self.answers)


class ImageProbeEnv(EpisodicEnv[ImageProbeConfig, _Episode]):
    """ImageProbe: name the colour of each turn's image (a probe for images lost after turn 1)."""

    config_class = ImageProbeConfig
    #: Every reply answers a question and moves on to the next: no state comes back.
    states_recur = False

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """One colour per turn drawn from the seed; ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x1A6E])
        colors = [int(c) for c in rng.integers(cfg.choices, size=cfg.questions)]
        jitter = rng.integers(-JITTER, JITTER + 1, size=(cfg.questions, 3))
        shades = [_shade(COLORS[c][1], d) for c, d in zip(colors, jitter, strict=True)]
        self._ep = _Episode(colors=colors, shades=shades)
        options_text = ", ".join(f"{_letter(i)} = {COLORS[i][0]}" for i in range(cfg.choices))
        intro = (
            "Each turn shows one image filled with a single colour. Name it with its letter "
            f"({options_text}). Reply with the letter only, for example <answer>A</answer>. "
            f"There are {cfg.questions} turns."
        )
        info = {"seed": seed, "colors": [COLORS[c][0] for c in self._ep.colors]}
        return self._question(intro), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Judge the reply's letter (or colour name) against this turn's image."""
        ep = self._playing()
        cfg = self.config
        turn = len(ep.answers)
        choice, error = self._parse(response_text)
        right = choice == ep.colors[turn]
        ep.answers.append(right)
        finished = len(ep.answers) >= cfg.questions
        ep.done = finished or len(ep.answers) >= cfg.max_turns
        metrics: dict[str, float | int | bool] = {"format_valid": error is None, "correct": right}
        if ep.done:
            metrics.update(success=ep.success, accuracy=sum(ep.answers) / len(ep.answers))
            if len(ep.answers) > 1:
                metrics["later_accuracy"] = sum(ep.answers[1:]) / (len(ep.answers) - 1)
        header = f"Invalid answer: {error}." if error else ("Right." if right else "Wrong.")
        if ep.done:
            end = "All turns are played." if finished else "No replies are left."
            obs = Observation(text=f"{header} {end}")
        else:
            obs = self._question(header)
        step_info = StepInfo(
            reward=(1.0 if right else 0.0) / cfg.questions,
            terminated=finished,
            truncated=ep.done and not finished,
            metrics=metrics,
            info={"turn": turn + 1, "answer": _letter(ep.colors[turn])},
        )
        return obs, ep.done, step_info

    def episode_reward(self) -> float:
        """The fraction of the episode's turns answered right."""
        ep = self._ep
        return sum(ep.answers) / self.config.questions if ep is not None else 0.0

    def oracle_response(self) -> str | None:
        """The letter of this turn's colour; None when the episode is over."""
        ep = self._unfinished()
        if ep is None:
            return None
        return f"<answer>{_letter(ep.colors[len(ep.answers)])}</answer>"

    def oracle_rationale(self) -> str | None:
        """What this turn's image shows and which option names it; None when the episode is over."""
        ep = self._unfinished()
        if ep is None:
            return None
        color = ep.colors[len(ep.answers)]
        return f"The image is filled with {COLORS[color][0]}, which is option {_letter(color)}."

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer: a random option's letter."""
        return f"<answer>{_letter(rng.randrange(self.config.choices))}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The questions still to ask (each image's colour and exact shade) and the answers right so far."""
        left = [f"{COLORS[c][0]} {shade}" for c, shade in zip(ep.colors, ep.shades, strict=True)]
        asked = "; ".join(left[len(ep.answers) :]) or "none"
        return f"Questions left: {asked}\nRight so far: {sum(ep.answers)}"

    def _distance(self, ep: _Episode) -> int:
        """One turn per question left while every answer was right; ``UNREACHABLE`` after a wrong one."""
        return len(ep.colors) - len(ep.answers) if all(ep.answers) else UNREACHABLE

    # ----- internals -----

    def _question(self, header: str) -> Observation:
        ep = self._episode()
        turn = len(ep.answers)
        side = self.config.image_size
        image = Image.new("RGB", (side, side), ep.shades[turn])
        return Observation.compose(header + "\n", image, f"\nTurn {turn + 1}: which colour is this?")

    def _parse(self, text: str) -> tuple[int | None, str | None]:
        """The option a reply names (its letter or colour name, in ``<answer>`` tags or first)."""
        block = answer_block(text)
        word = _FIRST_WORD.match(block.content if block.error is None else text[:200])
        if word is None:
            return None, "no letter found"
        name = word.group(1).lower()
        names = [_letter(i).lower() for i in range(self.config.choices)]
        colors = [COLORS[i][0] for i in range(self.config.choices)]
        if name in names:
            return names.index(name), None
        if name in colors:
            return colors.index(name), None
        return None, f"not one of the options {', '.join(n.upper() for n in names)}"


def _shade(rgb: tuple[int, int, int], jitter: np.ndarray) -> tuple[int, int, int]:
    r, g, b = (int(np.clip(v + int(d), 0, 255)) for v, d in zip(rgb, jitter, strict=True))
    return r, g, b


def _letter(index: int) -> str:
    return "ABCDEF"[index]
