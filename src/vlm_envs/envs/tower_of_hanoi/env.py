"""The Tower of Hanoi env: gather every disk on the goal peg, one disk at a time, never a larger one on a
smaller one.

Each turn shows the three pegs (A, B, C; disks numbered 1, the smallest, up) and the model answers 1 to
``max_moves_per_turn`` moves, ``<answer>A->C, A->B</answer>``. A malformed answer costs the turn; an
illegal move (from an empty peg, or onto a smaller disk) is not made and ends the turn's moves, and the
observation says why. Starts are drawn from the seed (each disk on a random peg, a random goal peg, at
least ``min_moves`` from solved) or the classic tower on A with the goal C. The episode ends when every
disk is on the goal peg (terminated, reward 1.0) or at the turn cap (truncated). The oracle plays a
shortest solution.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.tower_of_hanoi import rationale
from vlm_envs.envs.tower_of_hanoi.actions import format_moves, parse_moves
from vlm_envs.envs.tower_of_hanoi.config import TowerOfHanoiConfig
from vlm_envs.envs.tower_of_hanoi.pegs import (
    PEG_NAMES,
    Move,
    Position,
    draw_start,
    format_move,
    move_error,
    moved,
    shortest_moves,
    stacks,
)
from vlm_envs.envs.tower_of_hanoi.render import pegs_image, pegs_text
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import turns_for


@dataclasses.dataclass
class _Episode:
    pegs: Position
    goal: int
    optimal_moves: int
    moves: int = 0
    invalid_moves: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return all(p == self.goal for p in self.pegs)


class TowerOfHanoiEnv(BoardEnv[TowerOfHanoiConfig, _Episode]):
    """Tower of Hanoi: move every disk onto the goal peg, never a larger disk onto a smaller one."""

    config_class = TowerOfHanoiConfig
    board_heading = "The pegs now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A start and goal peg drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        pegs, goal = draw_start(cfg.disks, cfg.min_moves, cfg.start == "classic", seed)
        optimal = len(shortest_moves(pegs, goal))
        self._ep = _Episode(pegs, goal, optimal)
        info = {"seed": seed, "pegs": stacks(pegs), "goal": PEG_NAMES[goal], "optimal_moves": optimal}
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Make the moves in the reply's ``<answer>`` block, up to the first illegal one."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_moves(response_text, cfg.max_moves_per_turn)
        ep.turns += 1
        made: list[Move] = []
        illegal = None
        for move in parsed.moves:
            illegal = move_error(ep.pegs, move)
            if illegal is not None:
                ep.invalid_moves += 1
                illegal = f"{format_move(move)} is not allowed: {illegal}"
                break
            ep.pegs = moved(ep.pegs, move)
            ep.moves += 1
            made.append(move)
            if ep.success:
                break
        success = ep.success
        truncated = not success and ep.turns >= cfg.turn_limit
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and illegal is None,
            "moves": ep.moves,
            "invalid_moves": ep.invalid_moves,
            "disks_on_goal": sum(p == ep.goal for p in ep.pegs),
        }
        if ep.done:
            metrics.update(success=success, optimal_moves=ep.optimal_moves)
        obs = self._observation(self._feedback(parsed.error, made, illegal))
        info = {
            "made": [format_move(m) for m in made],
            "error": parsed.error or illegal,
            "pegs": stacks(ep.pegs),
        }
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next moves of a shortest solution, or None when done."""
        plan = self._plan()
        return None if plan is None else format_moves(plan[1])

    def oracle_rationale(self) -> str | None:
        """The largest disk still to place, the plan around it and the moves made now; None when done."""
        plan, ep = self._plan(), self._ep
        if plan is None or ep is None:
            return None
        return rationale.explain(ep.pegs, ep.goal, *plan)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random moves between different pegs."""
        moves = [
            tuple(rng.sample(range(3), 2)) for _ in range(rng.randint(1, self.config.max_moves_per_turn))
        ]
        return "<think>Let me move some disks.</think>\n" + format_moves([(a, b) for a, b in moves])

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """Each peg's disks bottom to top, the goal peg marked."""
        return pegs_text(ep.pegs, ep.goal)

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_moves_per_turn`` moves along a shortest solution."""
        return turns_for(len(shortest_moves(ep.pegs, ep.goal)), self.config.max_moves_per_turn)

    # ----- helpers -----

    def _plan(self) -> tuple[list[Move], list[Move]] | None:
        """A shortest solution from here and its moves made this turn; None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        solution = shortest_moves(ep.pegs, ep.goal)
        return solution, solution[: self.config.max_moves_per_turn]

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return pegs_image(ep.pegs, ep.goal, self.config.image_width)

    def _board_text(self) -> str:
        ep = self._episode()
        return pegs_text(ep.pegs, ep.goal)

    def _status(self) -> str:
        return f"Turns left: {self.config.turn_limit - self._episode().turns}."

    def _instructions(self) -> str:
        cfg = self.config
        ep = self._episode()
        rules = [
            f"Tower of Hanoi with {cfg.disks} disks on three pegs A, B and C. Move every disk onto peg "
            f"{PEG_NAMES[ep.goal]}.",
            "Move one disk at a time: the top disk of a peg, onto an empty peg or a larger disk. Disks are "
            f"numbered by size, 1 the smallest, {cfg.disks} the largest.",
        ]
        return self._rules_header(
            rules,
            text_legend="The text lists each peg's disks from the bottom to the top.",
            answer=(
                f"Answer with 1 to {cfg.max_moves_per_turn} moves inside <answer></answer>, for example "
                f"<answer>A->C, A->B</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(self, error: str | None, made: list[Move], illegal: str | None) -> str:
        ep = self._episode()
        text = "You moved: " + (", ".join(format_move(m) for m in made) if made else "nothing") + "."
        if illegal is not None:
            text += f" {illegal}; the moves after it were not made."
        return self._turn_header(
            error,
            "No disk was moved this turn.",
            text,
            ending(ep.success, ep.done, "Every disk is on the goal peg!"),
        )
