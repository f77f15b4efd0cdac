"""The MentalRotation env: turn a polycube until it looks like the target, or tell a rotation from
a mirror image.

``rotate`` mode: the observation shows the target view and the current view; each reply gives 1 to
``max_actions_per_turn`` quarter turns about the fixed axes. Success (reward 1.0, terminated) when
the current view is pixel-identical to the target's after a reply; the episode is truncated after
``max_turns`` replies. ``mirror`` mode: one reply, ``same`` (the right view is the left shape
rotated) or ``mirror`` (it is the mirror image, rotated); reward 1.0 when right.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.mental_rotation import rationale
from vlm_envs.envs.mental_rotation.actions import MIRROR_WORDS, parse_turns, parse_word
from vlm_envs.envs.mental_rotation.config import MentalRotationConfig
from vlm_envs.envs.mental_rotation.render import radius_of, render
from vlm_envs.envs.mental_rotation.shapes import (
    ROTATIONS,
    TURN_NAMES,
    is_chiral,
    key,
    mirrored,
    oriented,
    random_polycube,
    shortest_turns,
    turn,
)
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance, turns_for

_AXES = (
    "The axes drawn in the corner of each view stay fixed: x (red), y (green), z (blue). x+ turns the "
    "shape 90 degrees about the x axis, counterclockwise as seen from the tip of the x arrow; x- turns it "
    "the other way; likewise y+, y-, z+, z-."
)


@dataclasses.dataclass
class _Episode:
    cubes: np.ndarray
    radius: float
    left: Image.Image
    right: Image.Image
    orientation: int
    goals: set[int]
    optimal_turns: int
    answer: str | None
    #: ``mirror`` mode: the orientation the left view shows.
    left_at: int | None = None
    turns_used: int = 0
    replies: int = 0
    success: bool = False
    done: bool = False


class MentalRotationEnv(EpisodicEnv[MentalRotationConfig, _Episode]):
    """MentalRotation: turn a polycube to match a target view (or tell it from its mirror image)."""

    config_class = MentalRotationConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A shape and orientations drawn from the seed; ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x3D507])
        mirror = cfg.mode == "mirror"
        while True:
            cubes = random_polycube(int(rng.integers(cfg.min_cubes, cfg.max_cubes + 1)), rng)
            if not mirror or is_chiral(cubes):
                break
        radius = radius_of(cubes)
        self._renders: dict[Any, Image.Image] = {}
        if mirror:
            self._ep = self._mirror_episode(cubes, radius, rng)
        else:
            self._ep = self._rotate_episode(cubes, radius, rng)
        ep = self._ep
        info = {
            "seed": seed,
            "mode": cfg.mode,
            "cubes": ep.cubes.tolist(),
            "orientation": ep.orientation,
            "optimal_turns": ep.optimal_turns,
            "answer": ep.answer,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the reply's turns (``rotate``) or judge its word (``mirror``)."""
        ep = self._playing()
        cfg = self.config
        ep.replies += 1
        if cfg.mode == "mirror":
            word, error = parse_word(response_text)
            ep.success = word == ep.answer
            ep.done = True
            header = f"Invalid answer: {error}." if error else f"You answered {word}."
            header += " Right!" if ep.success else f" The answer was {ep.answer}."
            metrics: dict[str, float | int | bool] = {"format_valid": error is None, "success": ep.success}
            obs = Observation(text=header)
        else:
            parsed = parse_turns(response_text, cfg.max_actions_per_turn)
            for name in parsed.turns:
                ep.orientation = turn(ep.orientation, name)
                ep.turns_used += 1
            ep.right = self._view(ep.orientation)
            ep.success = ep.orientation in ep.goals
            ep.done = ep.success or ep.replies >= cfg.max_turns
            metrics = {"format_valid": parsed.error is None, "turns_used": ep.turns_used}
            if ep.done:
                metrics.update(success=ep.success, optimal_turns=ep.optimal_turns)
            obs = self._observation(self._feedback(parsed.error, parsed.turns))
        reward = 1.0 if ep.success else 0.0
        step_info = StepInfo(
            reward=reward,
            terminated=ep.done and (ep.success or cfg.mode == "mirror"),
            truncated=ep.done and not ep.success and cfg.mode == "rotate",
            metrics=metrics,
            info={"orientation": ep.orientation},
        )
        return obs, ep.done, step_info

    def oracle_response(self) -> str | None:
        """The BFS turns toward the target (``rotate``) or the right word (``mirror``); None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        if self.config.mode == "mirror":
            return f"<answer>{ep.answer}</answer>"
        turns = shortest_turns(ep.goals, ep.orientation)[: self.config.max_actions_per_turn]
        return "<answer>" + " ".join(turns) + "</answer>"

    def oracle_rationale(self) -> str | None:
        """Which quarter turns take one view to the other (or show the mirror image); None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        if self.config.mode == "mirror":
            return rationale.explain_mirror(ep.cubes, ep.left, ep.orientation, ep.answer, self._view)
        turns = shortest_turns(ep.goals, ep.orientation)
        return rationale.explain_turns(len(ep.cubes), turns, self.config.max_actions_per_turn)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer: random turns, or a random word in ``mirror`` mode."""
        if self.config.mode == "mirror":
            return f"<answer>{rng.choice(MIRROR_WORDS)}</answer>"
        n = rng.randint(1, self.config.max_actions_per_turn)
        return "<answer>" + " ".join(rng.choice(TURN_NAMES) for _ in range(n)) + "</answer>"

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The shape's cubes and the views: ``rotate``, the orientations that look like the target and the
        current one; ``mirror``, both views' orientations, whether the right one is mirrored, the answer."""
        cubes = " ".join(f"({x},{y},{z})" for x, y, z in ep.cubes.tolist())
        if self.config.mode == "rotate":
            targets = ", ".join(map(str, sorted(ep.goals)))
            return f"Cubes: {cubes}\nTarget orientations: {targets}\nCurrent orientation: {ep.orientation}"
        answered = "no" if not ep.done else ("right" if ep.success else "wrong")
        return (
            f"Cubes: {cubes}\nLeft orientation: {ep.left_at}\nRight orientation: {ep.orientation}, "
            f"{'mirrored' if ep.answer == 'mirror' else 'not mirrored'}\nAnswered: {answered}"
        )

    def _distance(self, ep: _Episode) -> int:
        """``rotate``: turns of ``max_actions_per_turn`` quarter turns along a shortest sequence to a view
        like the target; ``mirror``: the one answer (``UNREACHABLE`` after a wrong one)."""
        if self.config.mode == "mirror":
            return answer_distance(ep.success, lost=ep.done)
        turns = shortest_turns(ep.goals, ep.orientation)
        return turns_for(len(turns), self.config.max_actions_per_turn)

    # ----- episodes -----

    def _view(self, orientation: int, cubes: np.ndarray | None = None) -> Image.Image:
        ep_cubes = self._cubes if cubes is None else cubes
        placed = oriented(ep_cubes, orientation)
        k = key(placed)
        if k not in self._renders:
            self._renders[k] = render(placed, self.config.image_size, self._radius)
        return self._renders[k]

    def _rotate_episode(self, cubes: np.ndarray, radius: float, rng: np.random.Generator) -> _Episode:
        self._cubes, self._radius = cubes, radius
        target = int(rng.integers(len(ROTATIONS)))
        target_view = self._view(target)
        target_bytes = target_view.tobytes()
        goals = {r for r in range(len(ROTATIONS)) if self._view(r).tobytes() == target_bytes}
        distance = {r: len(shortest_turns(goals, r)) for r in range(len(ROTATIONS))}
        far = max(distance.values())
        need = min(self.config.min_turns, far)
        starts = [r for r in range(len(ROTATIONS)) if distance[r] >= need]
        start = starts[int(rng.integers(len(starts)))]
        return _Episode(
            cubes, radius, target_view, self._view(start), start, goals, distance[start], answer=None
        )

    def _mirror_episode(self, cubes: np.ndarray, radius: float, rng: np.random.Generator) -> _Episode:
        self._cubes, self._radius = cubes, radius
        first, second = (int(v) for v in rng.integers(len(ROTATIONS), size=2))
        answer = ("same", "mirror")[int(rng.integers(2))]
        shown = cubes if answer == "same" else mirrored(cubes)
        left, right = self._view(first), self._view(second, shown)
        return _Episode(cubes, radius, left, right, second, set(), 1, answer=answer, left_at=first)

    # ----- text -----

    def _observation(self, header: str) -> Observation:
        ep = self._episode()
        if self.config.mode == "mirror":
            return Observation.compose(header + "\nLeft:\n", ep.left, "\nRight:\n", ep.right, "\n")
        left = self.config.max_turns - ep.replies
        return Observation.compose(
            header + "\nTarget:\n", ep.left, "\nCurrent:\n", ep.right, f"\nReplies left: {left}."
        )

    def _instructions(self) -> str:
        cfg = self.config
        if cfg.mode == "mirror":
            return (
                "Two views of a shape made of unit cubes. Is the right one the left shape rotated, or its "
                "mirror image (rotated)? Answer <answer>same</answer> or <answer>mirror</answer>."
            )
        return "\n".join(
            [
                "A shape made of unit cubes is shown twice: the target view and the current view. Turn the "
                "current shape until it looks exactly like the target.",
                _AXES,
                f"Answer with 1 to {cfg.max_actions_per_turn} quarter turns inside <answer></answer>, for "
                f"example <answer>x+ y-</answer>. You have {cfg.max_turns} replies.",
            ]
        )

    def _feedback(self, error: str | None, turns: tuple[str, ...]) -> str:
        ep = self._episode()
        text = (
            f"Invalid answer: {error}. No turn was played."
            if error
            else "You turned: " + " ".join(turns) + "."
        )
        if ep.success:
            text += " The current view matches the target!"
        elif ep.done:
            text += " The episode is over: no replies are left."
        return text
