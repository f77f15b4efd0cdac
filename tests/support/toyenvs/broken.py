"""Deliberately broken variants of ColorsEnv, each breaking one rule that check_env must catch."""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any

import numpy as np

from toyenvs.colors import COLORS, ColorsEnv, StatedColorsEnv
from vlm_envs import Observation, StepInfo
from vlm_envs.imaging import attach_png, encode_png


class UnseededReset(ColorsEnv):
    """Ignores the reset seed."""

    def reset(self, seed: int | None = None):
        return super().reset(seed=random.SystemRandom().randrange(1 << 30))


class DropsImages(ColorsEnv):
    """Its chat message leaves the images out."""

    def format_observation(self, obs: Observation) -> dict[str, Any]:
        return {"role": obs.role, "content": [{"type": "text", "text": obs.text}]}


class SwapsImages(ColorsEnv):
    """Its chat message holds a different picture than the observation."""

    def format_observation(self, obs: Observation) -> dict[str, Any]:
        parts = obs.parts()
        for part in parts:
            if part["type"] == "image":
                part["image"] = part["image"].rotate(90)
        return {"role": obs.role, "content": parts}


class AttachesOtherBytes(ColorsEnv):
    """Attaches to its image the PNG of another picture."""

    def reset(self, seed: int | None = None):
        obs, info = super().reset(seed=seed)
        for image in obs.images:
            attach_png(image, encode_png(image.rotate(90)))
        return obs, info


class RaisesOnGarbage(ColorsEnv):
    """Parses the response as JSON without guarding it."""

    def step(self, response_text: str):
        json.loads(response_text) if "{" in response_text else None
        return super().step(response_text)


class HangsOnLongInput(ColorsEnv):
    """Does unbounded work on long responses."""

    def step(self, response_text: str):
        if len(response_text) > 100_000:
            time.sleep(30)
        return super().step(response_text)


class NeverRaisesAfterEnd(ColorsEnv):
    """Keeps answering after the episode ended."""

    def step(self, response_text: str):
        if self._done:
            return Observation(text="over"), True, StepInfo()
        return super().step(response_text)


class HashSeeded(ColorsEnv):
    """Derives its level from hash(), which changes with PYTHONHASHSEED."""

    def reset(self, seed: int | None = None):
        return super().reset(seed=hash(f"level-{seed}") % (1 << 30))


class NanReward(ColorsEnv):
    """Returns a reward that is not a number."""

    def step(self, response_text: str):
        obs, done, info = super().step(response_text)
        return obs, done, info.model_copy(update={"reward": float("nan")})


class RaisesOnPlaceholder(ColorsEnv):
    """Refuses replies that hold an image placeholder (as envs that quoted replies used to break)."""

    def step(self, response_text: str):
        if "<image>" in response_text:
            raise ValueError("text has 1 <image> placeholder(s) but the observation holds 0 image(s)")
        return super().step(response_text)


class LosingOracle(ColorsEnv):
    """Its oracle names a colour that is never the answer."""

    def oracle_response(self) -> str | None:
        return "<answer>no such colour</answer>"


class LegacyNumpySeed(ColorsEnv):
    """Seeds numpy's legacy RandomState, which takes seeds below 2**32 only."""

    def reset(self, seed: int | None = None):
        legacy = np.random.RandomState(seed)
        return super().reset(seed=int(legacy.randint(1 << 30)))


class UnseededReplaysSeedZero(ColorsEnv):
    """Plays the episode of seed 0 whenever no seed is given."""

    def reset(self, seed: int | None = None):
        return super().reset(seed=0 if seed is None else seed)


class SlotsFromReply(ColorsEnv):
    """Reads ``<image>`` in the model's reply as image slots (text is literal; this is the old mistake)."""

    def step(self, response_text: str):
        _, done, info = super().step(response_text)
        text = f"You wrote: {response_text[:200]}"
        slots = tuple(i for i in range(len(text)) if text.startswith("<image>", i))
        return Observation(text=text, image_slots=slots), done, info


class NanMetric(ColorsEnv):
    """Reports a metric that is not a number on every step."""

    def step(self, response_text: str):
        obs, done, info = super().step(response_text)
        return obs, done, info.model_copy(update={"metrics": {**info.metrics, "score": float("nan")}})


class IndexesAnyDigit(ColorsEnv):
    """Answers with a colour's number (``<answer>2</answer>``) and reads it with ``\\d``, which takes the
    digits of every script, then indexes a table of ASCII digits (as matchstick's equations once did)."""

    def random_response(self, rng: random.Random) -> str:
        return f"<answer>{rng.randrange(len(COLORS))}</answer>"

    def step(self, response_text: str):
        match = re.search(r"<answer>(\d)</answer>", response_text)
        if match is not None:
            response_text = f"<answer>{sorted(COLORS)[int('0123'.index(match.group(1)))]}</answer>"
        return super().step(response_text)


class AcceptsNonText(ColorsEnv):
    """Its ``step`` is set on the class after the class is made, so the protocol's guard never wraps it, and
    it makes text of any reply."""


def _any_reply_as_text(self: ColorsEnv, response_text: Any):
    return ColorsEnv.step(self, str(response_text))


AcceptsNonText.step = _any_reply_as_text  # type: ignore[method-assign]


class ForgetsTurnsTaken(ColorsEnv):
    """Restores a snapshot's episode but not the turns taken, so a restored episode outlives its turn cap
    (its random replies never name the colour: every episode runs to the cap)."""

    def random_response(self, rng: random.Random) -> str:
        return "<answer>purple</answer>"

    def restore_state(self, state: Any) -> Observation:
        obs = super().restore_state(state)
        self._turn = 0
        return obs


class KeyCountsTurns(StatedColorsEnv):
    """Writes the turn number into its state, so no state ever comes back."""

    def state_text(self) -> str | None:
        return f"{super().state_text()}\nTurn: {self._turn}"


class DistanceSkips(StatedColorsEnv):
    """Says two turns are left until the colour is named, though one answer names it."""

    def distance_to_goal(self) -> int | None:
        distance = super().distance_to_goal()
        return 2 * distance if distance is not None else None


class KeyForgetsTheSquare(StatedColorsEnv):
    """Keys the colour alone, so squares of one colour elsewhere share its key."""

    def state_key(self) -> str | None:
        return f"{self._color}-{self._solved}"


class HashKeyed(StatedColorsEnv):
    """Keys its state with ``hash()``, which changes with ``PYTHONHASHSEED``."""

    def state_key(self) -> str | None:
        return str(hash(self.state_text()))


class KeyRaises(StatedColorsEnv):
    """Its ``state_key`` raises once the episode has started."""

    def state_key(self) -> str | None:
        if self._color:
            raise RuntimeError("the key store is down")
        return None


class DistanceAsText(StatedColorsEnv):
    """Gives its distance to the goal as text (``"1"``), not an int."""

    def distance_to_goal(self) -> int | None:
        distance = super().distance_to_goal()
        return None if distance is None else str(distance)  # type: ignore[return-value]
