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
from vlm_envs.credit.shaping import PotentialShaping

TurnReward = Literal["episode", "return", "step"]
TURN_REWARDS: tuple[TurnReward, ...] = ("episode", "return", "step")
#: The shapings a turn sample's reward may get: none, or potential-based from the distance to the goal.
SHAPINGS = ("none", "distance")
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
    return mode, 1.0 if gamma is None else check_gamma(gamma)


def check_gamma(gamma: Any, name: str = "gamma") -> float:
    """``gamma`` as a discount: a number in [0, 1] (0 kept); ``ValueError`` naming ``name`` for anything
    else (NaN, inf, negative, above 1, a bool, a string)."""
    if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) or not 0.0 <= gamma <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {gamma!r:.80}")
    return float(gamma)


def check_shaping(mode: Any, history: History, max_turns: int) -> PotentialShaping | None:
    """The shaping a config names (YAML, a row), checked where it enters: ``None`` or ``"none"`` for
    none; ``"distance"``: :class:`~vlm_envs.credit.shaping.PotentialShaping` with the episode's turn cap
    ``max_turns`` as the distance of a state the goal cannot be reached from. It shapes the samples of a
    windowed history's turns: with the full history, ``ValueError`` (as for any other value)."""
    mode = "none" if mode is None else mode
    if mode not in SHAPINGS:
        raise ValueError(f"shaping must be one of {', '.join(SHAPINGS)}, got {mode!r:.80}")
    if mode == "none":
        return None
    if history.full:
        raise ValueError("shaping 'distance' shapes the turn samples of a windowed history, not the full one")
    return PotentialShaping(unreachable=max_turns)
