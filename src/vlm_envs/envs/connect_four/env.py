"""The Connect Four env: win a game against a built-in engine from a position where a win is within reach.

Each turn shows the board (columns numbered from 1 at the left) and the model answers one column,
``<answer>4</answer>``; its stone falls to the lowest empty cell, and the engine replies in the same step.
Four in a row (across, up or diagonal) wins. A malformed answer, a column off the board or a full column
costs the turn and changes nothing. The episode ends when you make four (terminated, reward 1.0), when the
engine does or the board fills (terminated, 0.0), or at the turn cap (truncated). The engine is a
deterministic depth-limited search (:mod:`~vlm_envs.envs.connect_four.engine`) with a tie order drawn
from the seed; starts come from seeded openings where you can win in ``min_win`` to ``max_win`` moves
(:mod:`~vlm_envs.envs.connect_four.generator`). The oracle plays a shortest win against the engine
(:mod:`~vlm_envs.envs.connect_four.solver`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any, Literal

from PIL import Image

from vlm_envs.envs.board import BoardEnv
from vlm_envs.envs.connect_four import rationale
from vlm_envs.envs.connect_four.actions import format_column, parse_column
from vlm_envs.envs.connect_four.board import Geometry, geometry, has_four, landing, replay
from vlm_envs.envs.connect_four.config import ConnectFourConfig
from vlm_envs.envs.connect_four.engine import horizon, reply
from vlm_envs.envs.connect_four.generator import generate
from vlm_envs.envs.connect_four.render import board_image, board_text
from vlm_envs.envs.connect_four.solver import SEARCH_BUDGET, Outcome, moves_left, shortest_win
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE

Result = Literal["won", "lost", "drawn"]
_ENDINGS: dict[Result, str] = {
    "won": "You made four in a row: you win!",
    "lost": "The engine made four in a row: you lost.",
    "drawn": "The board is full: a draw.",
}
_RESULT_WORDS: dict[Result, str] = {"won": "you won", "lost": "the engine won", "drawn": "a draw"}


@dataclasses.dataclass
class _Episode:
    you: int
    engine: int
    order: tuple[int, ...]
    optimal_moves: int
    #: The cells of each player's latest stone (ringed in the image).
    latest: tuple[int, ...]
    moves: int = 0
    invalid_moves: int = 0
    turns: int = 0
    result: Result | None = None
    done: bool = False

    @property
    def success(self) -> bool:
        return self.result == "won"

    @property
    def mask(self) -> int:
        return self.you | self.engine


class ConnectFourEnv(BoardEnv[ConnectFourConfig, _Episode]):
    """ConnectFour: beat a deterministic engine of chosen depth from a position where a win is in reach."""

    config_class = ConnectFourConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A start drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        g = self._geometry()
        start = generate(g, cfg.engine_depth, cfg.min_win, cfg.max_win, seed)
        you, engine, latest = replay(g, start.opening, start.you_first)
        self._ep = _Episode(you, engine, start.order, start.optimal_moves, latest)
        info = {
            "seed": seed,
            "board": board_text(g, you, engine),
            "opening": [c + 1 for c in start.opening],
            "first": "you" if start.you_first else "engine",
            "engine_order": [c + 1 for c in start.order],
            "optimal_moves": start.optimal_moves,
            "attempt": start.attempt,
        }
        return self._observation(self._instructions(start.you_first, start.opening)), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Drop a stone into the reply's column, then the engine replies (or spend the turn on an error)."""
        ep = self._playing()
        cfg, g = self.config, self._geometry()
        parsed = parse_column(response_text)
        ep.turns += 1
        illegal = None
        played: list[int] = []
        if parsed.column is not None:
            illegal = self._illegal(parsed.column)
            if illegal is None:
                played = self._play(parsed.column)
            else:
                ep.invalid_moves += 1
        truncated = ep.result is None and ep.turns >= cfg.turn_limit
        ep.done = ep.result is not None or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and illegal is None,
            "moves": ep.moves,
            "invalid_moves": ep.invalid_moves,
        }
        if ep.done:
            metrics.update(
                success=ep.success,
                lost=ep.result == "lost",
                drawn=ep.result == "drawn",
                optimal_moves=ep.optimal_moves,
            )
        obs = self._observation(self._feedback(parsed.error, illegal, played, truncated))
        info = {
            "played": [c + 1 for c in played],
            "error": parsed.error or illegal,
            "board": board_text(g, ep.you, ep.engine),
        }
        return self._binary_step(obs, ep.success, truncated, metrics, info, terminated=ep.result is not None)

    def oracle_response(self) -> str | None:
        """The first move of a shortest win against the engine; where the search finds none within its
        budget, the move the engine's own search would make for you. ``None`` when done."""
        ep = self._unfinished()
        return None if ep is None else format_column(self._oracle_column(ep))

    def oracle_rationale(self) -> str | None:
        """The win now, the threat blocked, the moves the column wins in and what it threatens."""
        ep = self._unfinished()
        if ep is None:
            return None
        outcome = self._search(ep)
        return rationale.explain(
            self._geometry(),
            ep.you,
            ep.engine,
            self._oracle_column(ep),
            outcome.moves,
            horizon(self.config.engine_depth),
            self.config.engine_depth,
        )

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer naming a random column (full ones included)."""
        column = rng.randrange(self.config.cols)
        return f"<think>Let me try column {column + 1}.</think>\n" + format_column(column)

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board, whose move it is (or how the game ended), and the engine: its depth and tie order."""
        g = self._geometry()
        turn = "Your move." if ep.result is None else f"Game over: {_RESULT_WORDS[ep.result]}."
        order = " ".join(str(c + 1) for c in ep.order)
        engine = f"Engine: depth {self.config.engine_depth}, tie order {order}."
        return f"{board_text(g, ep.you, ep.engine)}\n{turn}\n{engine}"

    def _distance(self, ep: _Episode) -> int | None:
        """Your fewest moves to a win against the engine (one move a turn): 0 once won, ``UNREACHABLE``
        after a loss or a draw or where the search proves no line wins; ``None`` past the search budget."""
        if ep.result is not None:
            return 0 if ep.success else UNREACHABLE
        outcome = self._search(ep)
        if not outcome.complete:
            return None
        return UNREACHABLE if outcome.moves is None else outcome.moves

    # ----- helpers -----

    def _geometry(self) -> Geometry:
        return geometry(self.config.rows, self.config.cols)

    def _search(self, ep: _Episode) -> Outcome:
        """The shortest win from the position now, searched to the end of the game within the budget."""
        g, depth = self._geometry(), self.config.engine_depth
        return shortest_win(g, depth, ep.order, ep.you, ep.mask, moves_left(g, ep.mask), SEARCH_BUDGET)

    def _oracle_column(self, ep: _Episode) -> int:
        column = self._search(ep).column
        if column is not None:
            return column
        g = self._geometry()
        return reply(g, self.config.engine_depth, g.centre_order, ep.you, ep.mask).column

    def _illegal(self, column: int) -> str | None:
        """Why ``column`` cannot take a stone now, or ``None``."""
        cols = self.config.cols
        if not 0 <= column < cols:
            return f"column {column + 1} is not on the board (columns 1 to {cols})"
        if not landing(self._geometry(), self._episode().mask, column):
            return f"column {column + 1} is full"
        return None

    def _play(self, column: int) -> list[int]:
        """Your stone in ``column``, then the engine's reply where the game goes on; the columns played."""
        ep, g = self._episode(), self._geometry()
        cell = landing(g, ep.mask, column)
        ep.you |= cell
        ep.moves += 1
        ep.latest = (cell,)
        if has_four(g, ep.you):
            ep.result = "won"
            return [column]
        if ep.mask == g.full:
            ep.result = "drawn"
            return [column]
        answer = reply(g, self.config.engine_depth, ep.order, ep.engine, ep.mask).column
        cell_engine = landing(g, ep.mask, answer)
        ep.engine |= cell_engine
        ep.latest = (cell, cell_engine)
        if has_four(g, ep.engine):
            ep.result = "lost"
        elif ep.mask == g.full:
            ep.result = "drawn"
        return [column, answer]

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return board_image(self._geometry(), ep.you, ep.engine, self.config.cell_size, ep.latest)

    def _board_text(self) -> str:
        ep = self._episode()
        return board_text(self._geometry(), ep.you, ep.engine)

    def _status(self) -> str:
        ep = self._episode()
        left = self.config.turn_limit - ep.turns
        return f"Turns left: {left}." if ep.done else f"Your move. Turns left: {left}."

    def _instructions(self, you_first: bool, opening: tuple[int, ...]) -> str:
        cfg = self.config
        rules = [
            f"Connect Four on a board of {cfg.rows} rows and {cfg.cols} columns, against an engine that "
            f"searches {cfg.engine_depth} {'ply' if cfg.engine_depth == 1 else 'plies'} ahead (a ply is one "
            "player's move). A stone dropped into a column falls to its lowest "
            "empty cell. Four of your stones in a row (across, up or diagonally) win; the engine replies "
            "after each of your moves. From this position you can force a win.",
            f"{'You' if you_first else 'The engine'} moved first; the engine's latest move was column "
            f"{opening[-1] + 1}.",
        ]
        return self._rules_header(
            rules,
            image_legend=(
                "In the image: your stones are red, the engine's yellow, each player's latest stone has a "
                f"white ring, and the columns are numbered 1 to {cfg.cols} from the left."
            ),
            text_legend="In the text board: X is yours, O the engine's, . empty; rows count from the bottom.",
            answer=(
                "Answer with the column to drop your stone into inside <answer></answer>, for example "
                f"<answer>{(cfg.cols + 1) // 2}</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(self, error: str | None, illegal: str | None, played: list[int], truncated: bool) -> str:
        if illegal is not None:
            text = f"Invalid move: {illegal}. No stone was dropped this turn."
        else:
            text = f"You played column {played[0] + 1}." if played else ""
            if len(played) == 2:
                text += f" The engine played column {played[1] + 1}."
        result = self._episode().result
        ending = _ENDINGS[result] if result is not None else None
        if ending is None and truncated:
            ending = "The episode is over: no turns are left."
        return self._turn_header(error, "No stone was dropped this turn.", text, ending)
