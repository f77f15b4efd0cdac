"""The SlidingPuzzle env: slide the numbered tiles into order, 1 to n²-1 row by row, the gap last.

Each turn shows the board and the model answers 1 to ``max_actions_per_turn`` moves in
``<answer>Up, Left</answer>``: the direction a tile slides into the gap (``Up`` slides the tile below the
gap up). A move with no tile to slide is skipped (``action_valid`` is then false); a malformed answer
costs the turn. The episode ends when the board is solved (terminated, reward 1.0) or after the turn
cap (truncated; ``max_turns``, by default enough turns for the oracle). Every start is a random walk
from the solved board, so it is solvable.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.sliding_puzzle import rationale
from vlm_envs.envs.sliding_puzzle.actions import format_moves, parse_moves
from vlm_envs.envs.sliding_puzzle.board import (
    MOVE_NAMES,
    Board,
    apply_move,
    in_place,
    scramble,
    solved,
    undo_path,
)
from vlm_envs.envs.sliding_puzzle.config import SlidingPuzzleConfig
from vlm_envs.envs.sliding_puzzle.render import board_image, board_text
from vlm_envs.envs.sliding_puzzle.solver import DISTANCE_NODES, shortest, solve
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import turns_for

Plan = tuple[tuple[int, ...], bool]


@dataclasses.dataclass
class _Episode:
    n: int
    board: Board
    walk: list[int]
    optimal_moves: int
    optimal_exact: bool
    plans: dict[Board, Plan]
    history: list[int] = dataclasses.field(default_factory=list)
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.board == solved(self.n)


class SlidingPuzzleEnv(BoardEnv[SlidingPuzzleConfig, _Episode]):
    """SlidingPuzzle: slide numbered tiles into order (3x3 or 4x4), every start solvable."""

    config_class = SlidingPuzzleConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A board scrambled by a walk drawn from the seed; ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x511DE])
        board, walk = scramble(cfg.n, cfg.scramble_moves, rng)
        self._ep = _Episode(cfg.n, board, walk, 0, False, plans={})
        moves, exact = self._plan()
        self._ep.optimal_moves, self._ep.optimal_exact = len(moves), exact
        info = {
            "seed": seed,
            "board": list(board),
            "n": cfg.n,
            "optimal_moves": len(moves),
            "optimal_exact": exact,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the moves in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_moves(response_text, cfg.max_actions_per_turn)
        ep.turns += 1
        before, played, blocked = ep.board, [], 0
        for move in parsed.moves:
            after = apply_move(ep.board, ep.n, move)
            if after is None:
                blocked += 1
                continue
            ep.board = after
            played.append(move)
            if ep.success:
                break
        ep.history += played
        self._remember_suffix(before, played)
        success = ep.success
        truncated = not success and ep.turns >= cfg.turn_limit
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and blocked == 0,
            "tiles_in_place": in_place(ep.board),
            "moves": len(ep.history),
        }
        if ep.done:
            metrics.update(success=success, optimal_moves=ep.optimal_moves)
        obs = self._observation(self._feedback(parsed.error, played, blocked, success, truncated))
        info = {"board": list(ep.board), "played": [MOVE_NAMES[m] for m in played], "error": parsed.error}
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next moves of the plan (shortest where ``optimal_exact``), or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return format_moves(self._plan()[0][: self.config.max_actions_per_turn])

    def oracle_rationale(self) -> str | None:
        """Where the gap is, how long the plan is and which tiles it slides next, or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        moves, exact = self._plan()
        return rationale.explain(ep.board, ep.n, moves, exact, self.config.max_actions_per_turn)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random moves."""
        moves = [rng.randrange(4) for _ in range(rng.randint(1, self.config.max_actions_per_turn))]
        return f"<think>I will slide a tile {MOVE_NAMES[moves[0]]}.</think>\n" + format_moves(moves)

    @property
    def board(self) -> Board:
        """The board now: tile numbers row-major, 0 the gap."""
        return self._episode().board

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board: each tile's number, ``_`` the gap."""
        return board_text(ep.board, ep.n)

    def _distance(self, ep: _Episode) -> int | None:
        """Turns of ``max_actions_per_turn`` moves along a shortest solution that an exact search finds
        within ``DISTANCE_NODES`` (a function of the board alone, whatever the oracle has planned);
        ``None`` past that budget."""
        moves = shortest(ep.board, ep.n, DISTANCE_NODES)
        return None if moves is None else turns_for(len(moves), self.config.max_actions_per_turn)

    # ----- helpers -----

    def _plan(self) -> Plan:
        """A solution from the board now: the solver's shortest (within its budget), else the shorter of
        a weighted search's and the way back along the moves played and the scramble (so a plan is never
        longer than that way back, and the oracle's first one never longer than the scramble)."""
        ep = self._episode()
        plan = ep.plans.get(ep.board)
        if plan is None:
            found = solve(ep.board, ep.n)
            back = tuple(undo_path(ep.walk + ep.history))
            shortest = found.moves if found.exact else None
            plan = (
                (shortest, True) if shortest is not None else (min(found.moves or back, back, key=len), False)
            )
            ep.plans[ep.board] = plan
        return plan

    def _remember_suffix(self, before: Board, played: list[int]) -> None:
        """Following a known plan leaves its rest a plan (shortest if it was): keep it for :meth:`_plan`."""
        ep = self._episode()
        known = ep.plans.get(before)
        if known is not None and tuple(played) == known[0][: len(played)]:
            ep.plans.setdefault(ep.board, (known[0][len(played) :], known[1]))

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return board_image(ep.board, ep.n, self.config.cell_size)

    def _board_text(self) -> str:
        ep = self._episode()
        return board_text(ep.board, ep.n)

    def _status(self) -> str:
        ep = self._episode()
        left = self.config.turn_limit - ep.turns
        return f"Tiles in place: {in_place(ep.board)}/{ep.n * ep.n - 1}. Turns left: {left}."

    def _instructions(self) -> str:
        cfg = self.config
        last = cfg.n * cfg.n - 1
        rules = [
            f"This is a sliding tile puzzle: {last} numbered tiles and one empty gap on a "
            f"{cfg.n}x{cfg.n} board. Put the tiles in order, 1 to {last} row by row from the top "
            "left, with the gap at the bottom right.",
            "A move slides a tile next to the gap into it: Up slides the tile below the gap up, "
            "Down the tile above it down, Left the tile to its right left, Right the tile to its "
            "left right.",
        ]
        return self._rules_header(
            rules,
            image_legend="In the image the gap is the dark square; a tile already in its place is green.",
            text_legend="In the grid, rows top to bottom, '_' is the gap.",
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} moves inside <answer></answer>, separated "
                f"by commas, for example <answer>Up, Left</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(
        self, error: str | None, played: list[int], blocked: int, success: bool, truncated: bool
    ) -> str:
        text = "You slid: " + (", ".join(MOVE_NAMES[m] for m in played) or "nothing") + "."
        if blocked:
            text += f" {blocked} of your moves had no tile to slide and were skipped."
        return self._turn_header(
            error,
            "No move was played this turn.",
            text,
            ending(success, truncated, "Solved: every tile is in order!"),
        )
