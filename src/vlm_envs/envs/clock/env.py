"""The clock env: read the time off an analog clock, or tell the time some minutes later.

The observation is a clock face drawn from the seed (the time, numerals, face colour, a distracting second
hand) and a question. The model answers ``<answer>3:45</answer>``; an analog dial does not tell morning
from afternoon, so ``15:45`` and ``3:45 pm`` count too. A right time ends the episode (terminated, reward
1.0); a wrong one is answered "not right" without the time, and after ``max_turns`` replies the episode
is truncated. ``minutes_off`` says how far the last answer was (around the dial).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.clock import rationale
from vlm_envs.envs.clock.config import ClockConfig
from vlm_envs.envs.clock.dial import FACES, clock_image
from vlm_envs.envs.clock.times import DIAL, distance, parse_time, spoken
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance

NUMERALS = ("arabic", "roman", "none")


@dataclasses.dataclass
class _Episode:
    shown: int
    later: int | None
    image: Image.Image
    #: What the dial looks like besides the time: the second hand's seconds, the numerals, the face.
    dial: tuple[int | None, str, int]
    replies: int = 0
    success: bool = False
    done: bool = False

    @property
    def answer(self) -> int:
        return (self.shown + (self.later or 0)) % DIAL


class ClockEnv(EpisodicEnv[ClockConfig, _Episode]):
    """Clock: read the time off an analog clock face (or tell the time some minutes later)."""

    config_class = ClockConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A clock and question drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0xC10C])
        step = cfg.minute_step
        shown = int(rng.integers(DIAL // step)) * step
        seconds = int(rng.integers(60)) if cfg.second_hand else None
        numerals = cfg.numerals if cfg.numerals != "any" else NUMERALS[int(rng.integers(3))]
        face = int(rng.integers(len(FACES)))
        kind = cfg.question if cfg.question != "any" else ("read", "later")[int(rng.integers(2))]
        later = int(rng.integers(1, cfg.max_later // step + 1)) * step if kind == "later" else None
        image = clock_image(shown, seconds, numerals, face, cfg.image_size)
        self._ep = _Episode(shown, later, image, (seconds, numerals, face))
        info = {"seed": seed, "time": spoken(shown), "question": kind, "answer": spoken(self._ep.answer)}
        info.update(later_minutes=later, numerals=numerals, seconds=seconds)
        return Observation.compose(self._question() + "\n", image, f"\n{self._how()}"), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Judge the time in the reply's ``<answer>`` block."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_time(response_text)
        ep.replies += 1
        ep.success = parsed.minutes == ep.answer
        truncated = not ep.success and ep.replies >= cfg.max_turns
        ep.done = ep.success or truncated
        metrics: dict[str, float | int | bool] = {"format_valid": parsed.error is None}
        if parsed.minutes is not None:
            metrics["minutes_off"] = distance(parsed.minutes, ep.answer)
        if ep.done:
            metrics["success"] = ep.success
        if parsed.error is not None:
            text = f"Invalid answer: {parsed.error}."
        elif ep.success:
            text = f"Right: it is {spoken(ep.answer)}."
        else:
            text = f"{spoken(parsed.minutes or 0)} is not right."
        left = cfg.max_turns - ep.replies
        if not ep.done:
            text += f" Look again: {left} {'try' if left == 1 else 'tries'} left. {self._how()}"
        elif truncated:
            text += " The episode is over: no tries are left."
        info = {"answer": spoken(ep.answer) if ep.done else None, "error": parsed.error}
        return self._binary_step(Observation(text=text), ep.success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The right time, or None when done."""
        ep = self._unfinished()
        return None if ep is None else f"<answer>{spoken(ep.answer)}</answer>"

    def oracle_rationale(self) -> str | None:
        """Where the hands point and the time they show (and the time later, if asked); None when done."""
        ep = self._unfinished()
        return None if ep is None else rationale.explain(ep.shown, ep.later)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of a random time on the config's minute step."""
        step = self.config.minute_step
        return f"<think>Maybe this.</think>\n<answer>{spoken(rng.randrange(DIAL // step) * step)}</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The dial (time, second hand, numerals, face), the question, and whether it was answered right
        (a wrong answer changes nothing)."""
        seconds, numerals, face = ep.dial
        hand = "no second hand" if seconds is None else f"second hand at {seconds} s"
        asked = "the time shown" if ep.later is None else f"the time {ep.later} minutes later"
        return (
            f"Clock: {spoken(ep.shown)}, {hand}, {numerals} numerals, face {face}\n"
            f"Question: {asked}\nSolved: {'yes' if ep.success else 'no'}"
        )

    def _distance(self, ep: _Episode) -> int:
        """1 until the right time is answered (wrong ones may be retried), then 0."""
        return answer_distance(ep.success, lost=False)

    # ----- helpers -----

    def _question(self) -> str:
        ep = self._episode()
        if ep.later is None:
            return "What time does this clock show?"
        return f"What time will this clock show {ep.later} minutes from now?"

    def _how(self) -> str:
        return (
            "Answer with the time as hours and minutes inside <answer></answer>, for example "
            "<answer>3:45</answer>."
        )
