"""A short walk on a line, for ``benchmarks/credit_learning.py``: a toy env where turn-level credit has
something to find and states recur across a group's episodes.

The walker stands on one of ``length`` cells, ``distance`` cells from a goal it cannot see (both drawn
by the seed). Each turn shows a lamp, a square of one colour that points the way (``cue_env``'s code:
blue is Left, yellow is Right); the reply's first ``Left`` or ``Right`` moves one cell that way (a wall
stops it), any other reply moves nothing. Reaching the goal ends the episode: step reward 1, success,
episode reward 1; nothing else scores. The env's own turn cap (``max_turns``) is a safety net above the
trainer's: the benchmark cuts episodes with the rollout's cap, so an episode that runs out ends
TRUNCATED, not ended by the env (which potential-based shaping reads: :mod:`vlm_envs.credit.shaping`).

Where it stands (:mod:`vlm_envs.state_signals`): the state is the walker's cell and the goal's; the
distance is the cells between them, exact (a walk straight to the goal meets no wall). A move and its
inverse, a wall and a malformed reply all bring a state back.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from PIL import Image
from pydantic import Field, model_validator

from cue_env import CUES
from vlm_envs.envs.config import EnvConfig, TurnCap
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.protocol import Observation, StepInfo

#: Each direction's step and the lamp colour that points it (``cue_env``'s colours for the two words).
MOVES = {"Left": (-1, CUES["blue"][1]), "Right": (1, CUES["yellow"][1])}
WORD = re.compile(r"\b(Left|Right)\b")
INTRO = (
    "Walk to the goal. Each picture is a lamp that points the way: blue is Left, yellow is Right. "
    "Reply with one word.\n"
)


class LineWalkConfig(EnvConfig):
    """Everything that defines a walk besides the seed."""

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"distance": 2},
        "medium": {"distance": 3},
        "hard": {"length": 15, "distance": 6},
    }

    #: Cells on the line.
    length: int = Field(7, ge=2, le=1000)
    #: Cells between the start and the goal (below ``length``).
    distance: int = Field(3, ge=1, le=999)
    #: Replies before the env ends the walk itself (a safety net above the trainer's cap).
    max_turns: TurnCap = 20
    #: Side of the lamp picture in pixels.
    image_size: int = Field(56, ge=28, le=1024)

    @model_validator(mode="after")
    def _fits(self) -> LineWalkConfig:
        if self.distance >= self.length:
            raise ValueError(f"distance ({self.distance}) must be below length ({self.length})")
        return self


@dataclasses.dataclass
class Walk:
    """One walk: the walker's cell, the goal's, the replies so far."""

    position: int
    goal: int
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.position == self.goal

    @property
    def way(self) -> str:
        """The direction of the goal (the lamp's)."""
        return "Left" if self.goal < self.position else "Right"


class LineWalkEnv(EpisodicEnv[LineWalkConfig, Walk]):
    """Walk a line to an unseen goal, one cell a turn, following a lamp."""

    config_class = LineWalkConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A start and a goal ``distance`` cells apart, drawn by the seed."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        pairs = [(p, p + s * cfg.distance) for p in range(cfg.length) for s in (-1, 1)]
        position, goal = random.Random(seed).choice([(p, g) for p, g in pairs if 0 <= g < cfg.length])
        self._ep = Walk(position, goal)
        return Observation.compose(INTRO, self._lamp()), {"seed": seed, "start": position, "goal": goal}

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Move one cell the way the reply says, if it says one."""
        ep = self._playing()
        match = WORD.search(response_text)
        if match is not None:
            ep.position = min(max(ep.position + MOVES[match.group(1)][0], 0), self.config.length - 1)
        ep.turns += 1
        ep.done = ep.success or ep.turns >= self.config.max_turns
        metrics: dict[str, float | int | bool] = {"format_valid": match is not None}
        if ep.done:
            metrics["success"] = ep.success
            text = "You reached the goal." if ep.success else "No replies are left."
            obs = Observation(text=text)
        else:
            obs = Observation.compose("" if match else "Say Left or Right. ", "The lamp now:", self._lamp())
        info = {"position": ep.position}
        return self._binary_step(obs, ep.success, ep.done and not ep.success, metrics, info)

    def oracle_response(self) -> str | None:
        """The lamp's direction; ``None`` once the walk is over."""
        ep = self._unfinished()
        return None if ep is None else ep.way

    def random_response(self, rng: random.Random) -> str:
        """Either direction."""
        return rng.choice(sorted(MOVES))

    def _state_text(self, ep: Walk) -> str:
        return f"Walker at cell {ep.position} of 0-{self.config.length - 1}, goal at cell {ep.goal}"

    def _distance(self, ep: Walk) -> int:
        return abs(ep.goal - ep.position)

    def _lamp(self) -> Image.Image:
        side = self.config.image_size
        return Image.new("RGB", (side, side), MOVES[self._episode().way][1])


build_env = LineWalkEnv.from_trainer
