"""What the model sees of an episode's past: everything, or the task and the last K turns.

``full`` (the default) shows the whole conversation and makes one training sample per episode.
``window:K`` shows, at every turn, the system prompt, the first prompt (the task), the last K turns
(model reply + the observation that answered it) and the current observation; older turns and their
images leave the context. Each turn of a windowed episode is then its own training sample
(:mod:`vlm_envs.rollout.turns`). With ``window:0`` the context is the task and the current
observation only: lossless for envs whose observation shows the whole state (Sokoban's frame).
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from typing import Any, Literal

from vlm_envs.credit.gigpo import discounted_returns

TurnReward = Literal["episode", "return", "step"]
TURN_REWARDS: tuple[TurnReward, ...] = ("episode", "return", "step")
_WINDOW = re.compile(r"window:(\d+)")


@dataclasses.dataclass(frozen=True)
class History:
    """``window`` is ``None`` for the full history, else the number K of past turns kept."""

    window: int | None = None

    def __post_init__(self) -> None:
        if self.window is not None and (isinstance(self.window, bool) or self.window < 0):
            raise ValueError(f"a history window must be an int >= 0, got {self.window!r}")

    @classmethod
    def parse(cls, spec: str | History | None) -> History:
        """``"full"``, ``"window:K"`` (K >= 0), ``None`` (full) or a :class:`History`."""
        if spec is None or isinstance(spec, History):
            return spec or cls()
        text = str(spec).strip().lower()
        if text == "full":
            return cls()
        match = _WINDOW.fullmatch(text)
        if match is None:
            raise ValueError(f"history must be 'full' or 'window:K' with K >= 0, got {spec!r}")
        return cls(int(match[1]))

    @property
    def full(self) -> bool:
        return self.window is None

    def kept(self, turn: int) -> range:
        """The past turns in the context of turn ``turn`` (0-based)."""
        return range(0 if self.window is None else max(0, turn - self.window), turn)

    def __str__(self) -> str:
        return "full" if self.window is None else f"window:{self.window}"


def turn_rewards(
    step_rewards: list[float], episode_reward: float, mode: TurnReward, gamma: float
) -> list[float]:
    """The reward of each turn's sample: the episode's (``episode``), the discounted return from
    that turn (``return``, with ``gamma``), or the turn's own step reward (``step``)."""
    if mode == "episode":
        return [episode_reward] * len(step_rewards)
    if mode == "step":
        return list(step_rewards)
    if mode == "return":
        return discounted_returns(step_rewards, gamma)
    raise ValueError(f"turn reward must be one of {TURN_REWARDS}, got {mode!r}")


def check_turn_reward(mode: Any = None, gamma: Any = None) -> tuple[TurnReward, float]:
    """A turn-reward mode and discount, checked where config enters (YAML, a row, the command line):
    ``None`` is the default (``episode``, 1.0); a gamma of 0 is kept; a gamma that is not a number in
    [0, 1] (NaN, inf, negative, above 1, a bool, a string) raises ``ValueError``."""
    mode = "episode" if mode is None else mode
    if mode not in TURN_REWARDS:
        raise ValueError(f"turn reward must be one of {', '.join(TURN_REWARDS)}, got {mode!r}")
    if gamma is None:
        return mode, 1.0
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r:.80}")
    return mode, float(gamma)
