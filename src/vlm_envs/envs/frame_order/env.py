"""The FrameOrder env: put the shuffled frames of a short animation back in time order.

A few coloured balls and boxes move at constant speed in a box, bounce off its walls and off each other
(exact integer physics, :mod:`vlm_envs.envs.frame_order.motion`); ``frames`` moments at equal time steps
are drawn, each under a letter, and shown in the order of their letters, which is shuffled. The text names
the first frame, so the order cannot be read backwards; the animation is kept only where every other
order that starts with that frame moves the objects clearly more (:mod:`vlm_envs.envs.frame_order.order`),
so identical frames and near ties never come up. The model answers the letters in time order,
``<answer>C, A, D, B</answer>``. The right order ends the episode (terminated, reward 1.0); a wrong one is
answered with how many frames are in their right place (as in Mastermind), and the model may try again up
to ``max_turns`` answers (truncated).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.frame_order import rationale
from vlm_envs.envs.frame_order.answer import parse_order
from vlm_envs.envs.frame_order.config import FrameOrderConfig
from vlm_envs.envs.frame_order.generator import Animation, generate
from vlm_envs.envs.frame_order.motion import WORLD
from vlm_envs.envs.frame_order.render import frame_image
from vlm_envs.envs.phrasing import counted
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance

PLURAL = {"ball": "balls", "box": "boxes"}


@dataclasses.dataclass
class _Episode:
    animation: Animation
    replies: int = 0
    solved: bool = False
    done: bool = False

    @property
    def success(self) -> bool:
        return self.solved

    @property
    def order(self) -> tuple[str, ...]:
        """The letters in time order: the answer."""
        return self.animation.labels


class FrameOrderEnv(EpisodicEnv[FrameOrderConfig, _Episode]):
    """FrameOrder: put the shuffled frames of an animation of moving, bouncing objects back in time order."""

    config_class = FrameOrderConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """An animation drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        animation = generate(cfg, np.random.default_rng([seed, 0xF4A3E]))
        self._ep = _Episode(animation)
        motion = animation.motion
        info = {
            "seed": seed,
            "order": ", ".join(animation.labels),
            "first": animation.labels[0],
            "collisions": motion.collisions,
            "bounces": motion.bounces,
            "true_motion": animation.true_motion,
            "gap": animation.gap,
        }
        pieces: list[str | Image.Image] = [self._instructions() + "\n"]
        for letter in sorted(animation.labels):
            time = animation.labels.index(letter)
            image = frame_image(animation.bodies, motion.frames[time], letter, cfg.frame_size)
            pieces += [f"Frame {letter}:\n", image, "\n"]
        pieces.append(self._how())
        return Observation.compose(*pieces), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Judge the order in the reply's ``<answer>`` block."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_order(response_text, sorted(ep.order))
        ep.replies += 1
        ep.solved = parsed.order == ep.order
        truncated = not ep.solved and ep.replies >= cfg.max_turns
        ep.done = ep.solved or truncated
        metrics: dict[str, float | int | bool] = {"format_valid": parsed.error is None}
        placed = 0
        if parsed.order is not None:
            placed = sum(a == b for a, b in zip(parsed.order, ep.order, strict=True))
            metrics["frames_in_place"] = placed
        if ep.done:
            metrics["success"] = ep.solved
        if parsed.error is not None:
            text = f"Invalid answer: {parsed.error}."
        elif ep.solved:
            text = "Right: that is the order in time."
        else:
            one = placed == 1
            text = (
                f"Not right: {placed} of the {len(ep.order)} frames {'is' if one else 'are'} in "
                f"{'its' if one else 'their'} right place."
            )
        left = cfg.max_turns - ep.replies
        if not ep.done:
            text += f" Try again: {counted(left, 'answer')} left. {self._how()}"
        elif truncated:
            text += " The episode is over: no answers are left."
        info = {"answer": ", ".join(ep.order) if ep.done else None, "error": parsed.error}
        return self._binary_step(Observation(text=text), ep.solved, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The letters in time order, or None when done."""
        ep = self._unfinished()
        return None if ep is None else f"<answer>{', '.join(ep.order)}</answer>"

    def oracle_rationale(self) -> str | None:
        """Which frame is first and how far the true order moves the objects against any other; None when
        done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return rationale.explain(ep.order, ep.animation.true_motion, ep.animation.gap)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer: the frames' letters in a random order."""
        letters = sorted(self._episode().order)
        return f"<think>Maybe this.</think>\n<answer>{', '.join(rng.sample(letters, len(letters)))}</answer>"

    @property
    def animation(self) -> Animation:
        """The episode's animation (objects, positions per frame in time order, letters)."""
        return self._episode().animation

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The objects, each frame's letter and positions in time order, and whether it was solved (a wrong
        order changes nothing)."""
        animation = ep.animation
        objects = ", ".join(f"{b.colour} {b.shape} (half-size {b.radius})" for b in animation.bodies)
        lines = [
            f"Box: {WORLD} units square; frames {self.config.ticks_per_frame} ticks apart",
            f"Objects: {objects}",
            "Frames in time order, each object's centre (x, y) in the order above:",
        ]
        for letter, positions in zip(animation.labels, animation.motion.frames, strict=True):
            lines.append(f"{letter}: " + " ".join(f"({x}, {y})" for x, y in positions))
        lines.append(f"Solved: {'yes' if ep.solved else 'no'}")
        return "\n".join(lines)

    def _distance(self, ep: _Episode) -> int:
        """1 until the right order is answered (wrong ones may be retried), then 0."""
        return answer_distance(ep.solved, lost=False)

    # ----- helpers -----

    def _instructions(self) -> str:
        ep, cfg = self._episode(), self.config
        shapes = sorted({b.shape for b in ep.animation.bodies})
        kinds = " and ".join(PLURAL[s] if len(ep.animation.bodies) > 1 else s for s in shapes)
        return (
            f"These {cfg.frames} frames of a short animation are shuffled. It shows "
            f"{counted(len(ep.animation.bodies), 'object')} ({kinds}) moving at constant speed in a box, "
            "bouncing off its walls and off each other; the frames were taken at equal time steps. "
            f"Frame {ep.order[0]} is the first. Put the frames in time order.\n"
            f"A wrong order is answered with how many frames are in their right place; you have "
            f"{counted(cfg.max_turns, 'answer')}."
        )

    def _how(self) -> str:
        return (
            "Answer with every frame's letter once, in time order, inside <answer></answer>, for example "
            "<answer>B, D, A, C</answer>."
        )
