"""The Rush Hour env: slide the vehicles until the red car X can drive out of the exit.

Each turn shows the board and the model answers 1 to ``max_actions_per_turn`` moves in
``<answer>B down 2, X right 3</answer>``: a vehicle slides along its own axis through free cells (cars are
2 cells long, trucks 3). A move that is not possible (an unknown letter, the wrong axis, a blocked or
off-board slide) is skipped and ``action_valid`` is false; a malformed answer costs the turn. The episode
ends when X reaches the exit at the right end of its row (terminated, reward 1.0) or after ``max_turns``
turns (truncated). Every level is solvable, and its shortest solution length is known.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.rush_hour import rationale
from vlm_envs.envs.rush_hour.actions import Move, format_moves, parse_moves
from vlm_envs.envs.rush_hour.board import NAMES, Layout, Position, apply_move, move_between
from vlm_envs.envs.rush_hour.config import RushHourConfig
from vlm_envs.envs.rush_hour.generator import generate
from vlm_envs.envs.rush_hour.render import board_image, board_text
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import turns_for


@dataclasses.dataclass
class _Episode:
    layout: Layout
    position: Position
    distance: dict[int, int]
    optimal_moves: int
    moves: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.layout.solved(self.position)


class RushHourEnv(BoardEnv[RushHourConfig, _Episode]):
    """RushHour: slide cars and trucks until the red car can drive out; solvable levels, shortest known."""

    config_class = RushHourConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A level drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x4054])
        level = generate(cfg.size, cfg.vehicles, cfg.min_moves, cfg.max_moves, cfg.max_search, rng)
        self._ep = _Episode(level.layout, level.start, level.distance, level.optimal_moves)
        info = {
            "seed": seed,
            "board": board_text(level.layout, level.start),
            "vehicles": len(level.layout.vehicles),
            "optimal_moves": level.optimal_moves,
            "attempt": level.attempt,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the moves in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_moves(response_text, cfg.max_actions_per_turn)
        ep.turns += 1
        played: list[Move] = []
        skipped = 0
        for vehicle, direction, cells in parsed.moves:
            after = apply_move(ep.layout, ep.position, vehicle, direction, cells)
            if after is None:
                skipped += 1
                continue
            ep.position = after
            ep.moves += 1
            played.append((vehicle, direction, cells))
            if ep.success:
                break
        success = ep.success
        truncated = not success and ep.turns >= cfg.max_turns
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and skipped == 0,
            "moves": ep.moves,
            "moves_to_solve": self._remaining(),
        }
        if ep.done:
            metrics.update(success=success, optimal_moves=ep.optimal_moves)
        obs = self._observation(self._feedback(parsed.error, played, skipped, success, truncated))
        info = {
            "played": format_moves(played),
            "error": parsed.error,
            "board": board_text(ep.layout, ep.position),
        }
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next moves of a shortest solution, or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return format_moves(self._plan())

    def oracle_rationale(self) -> str | None:
        """Where the red car is, what blocks it, and the next moves of a shortest solution, or None."""
        ep = self._unfinished()
        if ep is None:
            return None
        return rationale.explain(ep.layout, ep.position, self._remaining(), self._plan())

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random moves: vehicles on the board, each along its own axis."""
        vehicles = self._episode().layout.vehicles
        moves = []
        for _ in range(rng.randint(1, self.config.max_actions_per_turn)):
            v = rng.randrange(len(vehicles))
            way = ("left", "right") if vehicles[v].horizontal else ("up", "down")
            moves.append((v, rng.choice(way), rng.randint(1, 2)))
        return f"<think>Let me move {NAMES[moves[0][0]]}.</think>\n" + format_moves(moves)

    @property
    def layout(self) -> Layout:
        return self._episode().layout

    @property
    def position(self) -> Position:
        return self._episode().position

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board: each cell's vehicle letter, ``.`` empty, ``>`` the exit row."""
        return board_text(ep.layout, ep.position)

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_actions_per_turn`` moves along a shortest solution (the level's exact table)."""
        return turns_for(ep.distance[ep.layout.pack(ep.position)], self.config.max_actions_per_turn)

    # ----- helpers -----

    def _remaining(self) -> int:
        ep = self._episode()
        return ep.distance[ep.layout.pack(ep.position)]

    def _plan(self) -> list[Move]:
        """The next moves (up to ``max_actions_per_turn``) of a shortest solution: each goes to a neighbour
        one move nearer to solved (the first such, in the board's move order)."""
        ep = self._episode()
        state, moves = ep.layout.pack(ep.position), []
        while ep.distance[state] and len(moves) < self.config.max_actions_per_turn:
            nearer = next(s for s in ep.layout.neighbours(state) if ep.distance[s] == ep.distance[state] - 1)
            moves.append(move_between(ep.layout.unpack(state), ep.layout.unpack(nearer), ep.layout))
            state = nearer
        return moves

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return board_image(ep.layout, ep.position, self.config.cell_size)

    def _board_text(self) -> str:
        ep = self._episode()
        return board_text(ep.layout, ep.position)

    def _status(self) -> str:
        ep = self._episode()
        return f"Moves made: {ep.moves}. Turns left: {self.config.max_turns - ep.turns}."

    def _instructions(self) -> str:
        cfg = self.config
        rules = [
            f"This is Rush Hour on a {cfg.size}x{cfg.size} board. Slide the vehicles so that the red car X "
            "can drive out of the exit at the right end of its row.",
            "Cars are 2 cells long and trucks 3. A vehicle slides only along its length (a horizontal one "
            "left or right, a vertical one up or down), through empty cells; vehicles never turn or jump. "
            "A move slides one vehicle any number of cells.",
        ]
        return self._rules_header(
            rules,
            image_legend=(
                "In the image each vehicle carries its letter; X is red, and the exit is the gap in "
                "the right wall."
            ),
            text_legend=(
                "In the grid each cell holds its vehicle's letter, '.' is empty, and '>' marks the exit row."
            ),
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} moves inside <answer></answer>, each a letter, "
                "a direction and a number of cells, for example <answer>B down 2, X right 3</answer>. You "
                f"have {cfg.max_turns} turns."
            ),
        )

    def _feedback(
        self, error: str | None, played: list[Move], skipped: int, success: bool, truncated: bool
    ) -> str:
        text = "You moved: " + (", ".join(f"{NAMES[v]} {d} {k}" for v, d, k in played) or "nothing") + "."
        if skipped:
            text += f" {skipped} of your moves were not possible and were skipped."
        return self._turn_header(
            error, "No move was played this turn.", text, ending(success, truncated, "Solved: X drives out!")
        )
