"""The Matchstick env: move one matchstick to make a false equation true.

The image shows ``A op B = C`` in matchsticks (seven-segment digits, ``+`` or ``-``, and ``=``), false as
shown. The model answers the corrected equation, ``<answer>6 + 3 = 9</answer>``; it is right when it is
true and differs from the one shown by exactly one moved stick (a stick may go to another symbol or
elsewhere in its own; every symbol must stay a digit or an operator, numbers keep their length, and
the ``=`` stays). A right answer ends the episode (terminated, reward 1.0); a wrong one is answered with
what is wrong (not true, or not one move away) and the model may try again, up to ``max_turns`` answers
(truncated). Every puzzle is made by moving one stick of a true equation, so each has a solution.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from vlm_envs.envs.answers import answer_block
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.matchstick import rationale
from vlm_envs.envs.matchstick.config import MatchstickConfig
from vlm_envs.envs.matchstick.equation import Equation, moves, one_move_away, parse, sticks
from vlm_envs.envs.matchstick.generator import generate
from vlm_envs.envs.matchstick.render import equation_image
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance


@dataclasses.dataclass
class _Episode:
    shown: Equation
    truth: Equation
    turns: int = 0
    solved: bool = False
    done: bool = False

    @property
    def success(self) -> bool:
        return self.solved


class MatchstickEnv(EpisodicEnv[MatchstickConfig, _Episode]):
    """Matchstick: move one matchstick to make a false equation true (seven-segment digits, + and -)."""

    config_class = MatchstickConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A puzzle drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        shown, truth = generate(cfg.digits, cfg.operators, np.random.default_rng([seed, 0x3A7C]))
        self._ep = _Episode(shown, truth)
        info = {"seed": seed, "equation": str(shown), "solution": str(truth), "sticks": sticks(shown)}
        obs = Observation.compose(self._instructions() + "\n", equation_image(shown, cfg.stick_px))
        return obs, info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Check the equation in the reply's ``<answer>`` block."""
        ep = self._playing()
        cfg = self.config
        ep.turns += 1
        block = answer_block(response_text)
        answer = parse(block.content) if block.error is None else None
        error = block.error or (None if answer is not None else "write the equation as in 6 + 3 = 9")
        one = answer is not None and one_move_away(ep.shown, answer)
        true = answer is not None and answer.true
        ep.solved = one and true
        truncated = not ep.solved and ep.turns >= cfg.max_turns
        ep.done = ep.solved or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": error is None,
            "one_move": one,
            "equation_true": true,
        }
        if ep.done:
            metrics["success"] = ep.solved
        text = self._feedback(error, one, true, truncated)
        info = {"answer": None if answer is None else str(answer), "error": error}
        return self._binary_step(Observation.compose(text), ep.solved, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The true equation the puzzle was made from, or None when done."""
        ep = self._unfinished()
        return None if ep is None else f"<answer>{ep.truth}</answer>"

    def oracle_rationale(self) -> str | None:
        """Why the shown equation is false and which symbols the moved stick changes, or None when done."""
        ep = self._unfinished()
        return None if ep is None else rationale.explain(ep.shown, ep.truth)

    def random_response(self, rng: random.Random) -> str:
        """An equation one random stick move from the one shown (true or not)."""
        ep = self._episode()
        pick = rng.choice(list(moves(ep.shown)))
        return f"<think>Maybe {pick}.</think>\n<answer>{pick}</answer>"

    def _state_text(self, ep: _Episode) -> str:
        """The equation the sticks show, and whether it was put right (a wrong answer changes nothing)."""
        return f"Equation: {ep.shown}\nSolved: {'yes' if ep.solved else 'no'}"

    def _distance(self, ep: _Episode) -> int:
        """1 until a right answer (wrong ones may be retried), then 0."""
        return answer_distance(ep.solved, lost=False)

    @property
    def shown(self) -> Equation:
        """The equation as the sticks show it."""
        return self._episode().shown

    # ----- helpers -----

    def _instructions(self) -> str:
        cfg = self.config
        return "\n".join(
            [
                "The image shows an equation made of matchsticks, and it is false. Move exactly one "
                "matchstick to make it true.",
                "Digits are drawn as on a seven-segment display; + is two crossed sticks, - one stick, "
                "and = two sticks that stay where they are. The moved stick may go into another symbol "
                "or elsewhere in its own, and every symbol must still be a digit, + or -.",
                "Answer with the corrected equation inside <answer></answer>, for example "
                f"<answer>6 + 3 = 9</answer>. You have {cfg.max_turns} answers.",
                "The equation:",
            ]
        )

    def _feedback(self, error: str | None, one: bool, true: bool, truncated: bool) -> str:
        if error is not None:
            text = f"Invalid answer: {error}."
        elif one and true:
            return "Right: one matchstick moved, and the equation is true."
        elif not one:
            text = "Not right: that is not one matchstick move from the equation shown."
        else:
            text = "Not right: that is one matchstick move away, but the equation is false."
        if truncated:
            return text + " The episode is over: no answers are left."
        return text + " Try again."
