"""The falling blocks env (Tetris without gravity's clock): drop each piece of a seeded sequence into a
well with garbage rows until enough lines are cleared.

Each turn shows the well (columns numbered under it, rows at its left from 1 at the bottom), the current
piece in its four rotations and the next ``preview`` pieces; the model answers the rotation and the column
of the piece's leftmost cell, ``<answer>rotate 1, column 4</answer>``. The piece falls straight down until
it rests (no sliding under overhangs) and full rows clear. A malformed answer or an impossible drop (a
rotation outside 0-3, a column that puts the piece outside the well) costs the turn and changes nothing.
The episode ends when ``lines`` lines are cleared (terminated, reward 1.0), when a piece comes to rest
sticking out above the well or the ``pieces`` run out first (terminated, lost), or at the turn cap
(truncated). Levels are built around a plan of the fewest placements (see
:mod:`vlm_envs.envs.falling_blocks.generator`), which the oracle plays.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.falling_blocks import rationale
from vlm_envs.envs.falling_blocks.actions import format_drop, parse_drop, placement_error
from vlm_envs.envs.falling_blocks.config import FallingBlocksConfig
from vlm_envs.envs.falling_blocks.generator import Level, generate_level
from vlm_envs.envs.falling_blocks.pieces import ROTATIONS, SPAWN, distinct_rotations, shape
from vlm_envs.envs.falling_blocks.render import pieces_text, well_image, well_text
from vlm_envs.envs.falling_blocks.solver import Placement, Solver, fewest_placements_bound
from vlm_envs.envs.falling_blocks.well import Board, Drop, column_heights, drop
from vlm_envs.envs.phrasing import counted
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE

#: Drops the solver may try for the distance of a position off the level's plan.
DISTANCE_NODES = 2_000
#: A position: the board, the pieces placed, the lines still to clear and whether a piece topped out.
State = tuple[Board, int, int, bool]


@dataclasses.dataclass
class _Episode:
    level: Level
    board: Board
    lines_left: int
    solver: Solver
    #: Plans of the fewest placements, by position (the level's, their suffixes, the solver's).
    plans: dict[State, tuple[Placement, ...]]
    #: Winning plans not shown the fewest (a level whose plan no search confirmed).
    fallbacks: dict[State, tuple[Placement, ...]]
    #: Positions the solver showed no placements win from, and those it could not decide.
    lost: set[State] = dataclasses.field(default_factory=set)
    undecided: set[State] = dataclasses.field(default_factory=set)
    placed: int = 0
    topped_out: bool = False
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.lines_left <= 0

    @property
    def state(self) -> State:
        return self.board, self.placed, self.lines_left, self.topped_out

    @property
    def coming(self) -> str:
        """The pieces still to drop, the current one first."""
        return self.level.sequence[self.placed :]

    @property
    def lost_game(self) -> bool:
        return not self.success and (self.topped_out or not self.coming)


class FallingBlocksEnv(BoardEnv[FallingBlocksConfig, _Episode]):
    """Falling blocks: drop each piece of a known sequence (rotation and column) to clear lines of garbage."""

    config_class = FallingBlocksConfig
    board_heading = "The well now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A level drawn from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        level = generate_level(cfg.level_spec(), seed)
        start: State = (level.board, 0, cfg.lines, False)
        self._ep = _Episode(
            level=level,
            board=level.board,
            lines_left=cfg.lines,
            solver=Solver(cfg.width, cfg.height, level.sequence),
            plans={start: level.plan} if level.optimal_exact else {},
            fallbacks={} if level.optimal_exact else {start: level.plan},
        )
        info = {
            "seed": seed,
            "well": well_text(level.board, cfg.width, cfg.height),
            "sequence": level.sequence,
            "optimal_placements": len(level.plan),
            "optimal_exact": level.optimal_exact,
            "attempt": level.attempt,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Drop the current piece as the reply's ``<answer>`` says (or spend the turn on an invalid one)."""
        ep = self._playing()
        cfg = self.config
        piece = ep.coming[0]
        parsed = parse_drop(response_text)
        error = parsed.error
        if error is None:
            error = placement_error(piece, parsed.rotation, parsed.column, cfg.width)
        ep.turns += 1
        result: Drop | None = None
        if error is None:
            result = self._drop(ep, parsed.rotation, parsed.column - 1)
        success = ep.success
        lost = ep.lost_game
        truncated = not (success or lost) and ep.turns >= cfg.turn_limit
        ep.done = success or lost or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": error is None,
            "lines_cleared": cfg.lines - max(ep.lines_left, 0),
            "pieces_placed": ep.placed,
        }
        if ep.done:
            metrics.update(success=success, topped_out=ep.topped_out, optimal_placements=len(ep.level.plan))
        feedback = self._feedback(error, piece, parsed.rotation, parsed.column, result, truncated)
        info = {"error": error, "well": well_text(ep.board, cfg.width, cfg.height)}
        return self._binary_step(
            self._observation(feedback), success, truncated, metrics, info, terminated=success or lost
        )

    # ----- policies -----

    def plan(self) -> tuple[Placement, ...] | None:
        """A plan of the fewest placements (rotation, column from 0) that wins from the position now: the
        level's or the solver's, within :data:`DISTANCE_NODES` drops; None where there is none, or none
        was found within them."""
        ep = self._episode()
        state = ep.state
        known = ep.plans.get(state)
        if known is not None or state in ep.lost or state in ep.undecided or ep.success or ep.lost_game:
            return known
        if fewest_placements_bound(ep.board, ep.lines_left, self.config.width) > len(ep.coming):
            ep.lost.add(state)
            return None
        found = ep.solver.solve(ep.board, ep.placed, ep.lines_left, DISTANCE_NODES)
        if found.plan is not None:
            ep.plans[state] = found.plan
        else:
            (ep.lost if found.complete else ep.undecided).add(state)
        return found.plan

    def oracle_response(self) -> str | None:
        """The first drop of a plan of the fewest placements (else of the level's winning plan)."""
        ep = self._unfinished()
        if ep is None:
            return None
        plan = self.plan() or ep.fallbacks.get(ep.state)
        return None if not plan else format_drop(plan[0][0], plan[0][1] + 1)

    def oracle_rationale(self) -> str | None:
        """The lines to clear, the fewest placements that clear them, and what the next drop does."""
        ep = self._unfinished()
        if ep is None:
            return None
        plan = self.plan()
        fewest = plan is not None
        plan = plan or ep.fallbacks.get(ep.state)
        if not plan:
            return None
        cfg = self.config
        return rationale.explain(ep.board, ep.coming[0], ep.lines_left, plan, fewest, cfg.width, cfg.height)

    def random_response(self, rng: random.Random) -> str:
        """A drop of the current piece at a random rotation and a random column it fits."""
        ep = self._episode()
        piece = ep.coming[0] if ep.coming else "O"
        rotation = rng.randrange(ROTATIONS)
        column = rng.randint(1, self.config.width - shape(piece, rotation).width + 1)
        return f"<think>Let me drop the {piece} at column {column}.</think>\n" + format_drop(rotation, column)

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The well, every piece still to come (the current one first) and the lines still to clear."""
        cfg = self.config
        rows = [well_text(ep.board, cfg.width, cfg.height)]
        rows.append("Pieces to come, the current one first: " + (" ".join(ep.coming) or "none"))
        rows.append(f"Lines still to clear: {max(ep.lines_left, 0)}")
        if ep.topped_out:
            rows.append("Topped out: the last piece came to rest sticking out above the well.")
        return "\n".join(rows)

    def _distance(self, ep: _Episode) -> int | None:
        """The fewest placements that clear the lines still to clear with the pieces to come (the solver's,
        within :data:`DISTANCE_NODES` drops; the level's plan from the start): 0 once cleared,
        ``UNREACHABLE`` once topped out or where no placements of the pieces left clear them, None where
        the search ran out of drops."""
        if ep.success:
            return 0
        if ep.lost_game:
            return UNREACHABLE
        plan = self.plan()
        if plan is not None:
            return len(plan)
        return UNREACHABLE if ep.state in ep.lost else None

    # ----- helpers -----

    def _drop(self, ep: _Episode, rotation: int, column: int) -> Drop:
        """Drop the current piece, and keep what the plans known before it say of the position after it."""
        cfg = self.config
        piece = ep.coming[0]
        played = (_alike(piece, rotation), column)
        before = ep.state
        result = drop(
            ep.board,
            shape(piece, rotation),
            column,
            cfg.width,
            cfg.height,
            column_heights(ep.board, cfg.width),
        )
        ep.placed += 1
        if result.topped_out:
            ep.topped_out = True
            return result
        ep.board = result.board
        ep.lines_left -= result.cleared
        for plans in (ep.plans, ep.fallbacks):
            known = plans.get(before)
            if known and known[0] == played:
                plans.setdefault(ep.state, known[1:])
        return result

    def _board_image(self) -> Image.Image:
        ep, cfg = self._episode(), self.config
        return well_image(ep.board, ep.coming, cfg.width, cfg.height, cfg.cell_size, cfg.preview)

    def _board_text(self) -> str:
        ep, cfg = self._episode(), self.config
        return well_text(ep.board, cfg.width, cfg.height) + "\n" + pieces_text(ep.coming, cfg.preview)

    def _status(self) -> str:
        ep, cfg = self._episode(), self.config
        coming = ep.coming
        now = f"Now: {coming[0]}." if coming else "No pieces are left."
        following = ", ".join(coming[1 : 1 + cfg.preview])
        nxt = f" Next: {following}." if cfg.preview and following else ""
        cleared = cfg.lines - max(ep.lines_left, 0)
        return (
            f"{now}{nxt} Lines cleared: {cleared} of {cfg.lines}. Pieces left: {len(coming)}. "
            f"Turns left: {cfg.turn_limit - ep.turns}."
        )

    def _instructions(self) -> str:
        cfg = self.config
        shapes = ", ".join(f"{name} {'/'.join(rows)}" for name, rows in SPAWN.items())
        rules = [
            f"Falling blocks (Tetris): a well {cfg.width} columns wide and {cfg.height} rows deep with "
            f"garbage rows at the bottom. Clear {counted(cfg.lines, 'line')} (a row filled from wall to "
            f"wall) before the {cfg.pieces} pieces run out.",
            "Each turn you drop the current piece: it falls straight down until it rests on the floor or a "
            "filled cell (it cannot slide under an overhang). Then every full row is cleared and the rows "
            "above it move down. A piece that comes to rest sticking out above the well tops out: you lose.",
            "Rotate 0 is the piece as shown; rotate 1, 2 and 3 turn it 1, 2 and 3 quarter turns clockwise. "
            f"The pieces at rotate 0 (rows top first, # a cell): {shapes}.",
            f"Columns are numbered 1 to {cfg.width} from the left, rows 1 to {cfg.height} from the bottom; "
            "the column you name is that of the rotated piece's leftmost cell.",
        ]
        following = {0: "", 1: " and the next piece"}.get(cfg.preview, f" and the next {cfg.preview} pieces")
        return self._rules_header(
            rules,
            image_legend=(
                "In the image: grey squares are filled cells; on the right, the current piece in its four "
                f"rotations{following}."
            ),
            text_legend=(
                "In the text well: # is a filled cell, . an empty one; the current piece's rotations "
                "follow it."
            ),
            answer=(
                "Answer with the rotation and the column inside <answer></answer>, for example "
                f"<answer>rotate 1, column 4</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(
        self, error: str | None, piece: str, rotation: int, column: int, result: Drop | None, truncated: bool
    ) -> str:
        ep = self._episode()
        played = ""
        if result is not None:
            played = f"You dropped the {piece} at rotate {rotation}, column {column}: "
            if result.topped_out:
                played += "it sticks out above the well. Topped out: the episode is lost."
            else:
                where = rationale.rows_named(result.row, shape(piece, rotation).height)
                clears = f"cleared {counted(result.cleared, 'line')}" if result.cleared else "cleared no line"
                played += f"it came to rest on {where} and {clears}."
        end = ending(ep.success, truncated, f"Cleared {counted(self.config.lines, 'line')}!")
        if ep.lost_game and not ep.topped_out:
            end = "No pieces are left: the episode is lost."
        return self._turn_header(error, "No piece was dropped this turn.", played, end)


def _alike(piece: str, rotation: int) -> int:
    """The lowest rotation of ``piece`` with the same cells as ``rotation``."""
    picture = shape(piece, rotation).picture
    return next(r for r in distinct_rotations(piece) if shape(piece, r).picture == picture)
