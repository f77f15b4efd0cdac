"""The Minesweeper env: reveal every safe cell of a field without revealing a mine.

The episode starts with the first reveal made (a cell with no mine around it, so an area opens; dense
fields open a few more safe cells, see :mod:`~vlm_envs.envs.minesweeper.generator`), and every field can be
cleared by reasoning from the numbers alone. Each turn the model answers 1 to ``max_actions_per_turn`` cells
in ``<answer>C4, D5</answer>`` (column letter, row number); they are revealed in order. Revealing a mine
ends the episode (terminated, reward 0.0); revealing the last safe cell wins it (terminated, reward 1.0);
the turn cap ends it too (truncated; ``max_turns``, by default enough turns for the oracle). A cell already
revealed is skipped (``action_valid`` false); a malformed answer costs the turn. What a revealed cell shows
is new information each turn.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.minesweeper import rationale
from vlm_envs.envs.minesweeper.actions import format_cells, parse_cells
from vlm_envs.envs.minesweeper.board import Cell, Field, flood, name, neighbours
from vlm_envs.envs.minesweeper.config import MinesweeperConfig
from vlm_envs.envs.minesweeper.deduce import Reason, deduce
from vlm_envs.envs.minesweeper.generator import generate
from vlm_envs.envs.minesweeper.render import field_image, field_text
from vlm_envs.protocol import Observation, StepInfo

#: Groups of cells (by the number that proves them) the oracle reveals in one reply: a short rationale.
MAX_REASONS = 3


@dataclasses.dataclass
class _Episode:
    field: Field
    revealed: set[Cell]
    hit: Cell | None = None
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.hit is None and len(self.revealed) == self.field.safe_cells

    @property
    def hidden(self) -> int:
        return self.field.rows * self.field.cols - len(self.revealed)


class MinesweeperEnv(BoardEnv[MinesweeperConfig, _Episode]):
    """Minesweeper: clear a field revealed turn by turn, every field solvable without guessing."""

    config_class = MinesweeperConfig
    board_heading = "The field now:"

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A field drawn from the seed, its opening revealed; ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        level = generate(*cfg.size, cfg.mines, np.random.default_rng([seed, 0x3135]))
        self._ep = _Episode(level.field, level.opening())
        info = {
            "seed": seed,
            "size": list(cfg.size),
            "mines": sorted(level.field.mines),
            "start": name(level.start, cfg.size[1]),
            "hints": [name(c, cfg.size[1]) for c in level.hints],
            "attempt": level.attempt,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Reveal the cells in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_cells(response_text, *cfg.size, cfg.max_actions_per_turn)
        ep.turns += 1
        played, repeated = [], 0
        for cell in parsed.cells:
            if cell in ep.revealed:
                repeated += 1
                continue
            played.append(cell)
            if cell in ep.field.mines:
                ep.hit = cell
                break
            flood(ep.field, cell, ep.revealed)
            if ep.success:
                break
        success = ep.success
        terminated = success or ep.hit is not None
        truncated = not terminated and ep.turns >= cfg.turn_limit
        ep.done = terminated or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and repeated == 0,
            "cells_revealed": len(ep.revealed),
            "safe_left": ep.field.safe_cells - len(ep.revealed),
        }
        if ep.done:
            metrics.update(success=success, hit_mine=ep.hit is not None)
        obs = self._observation(self._feedback(parsed.error, played, repeated, success, truncated))
        info = {"revealed": [name(c, cfg.size[1]) for c in played], "error": parsed.error}
        return self._binary_step(obs, success, truncated, metrics, info, terminated=terminated)

    def oracle_response(self) -> str | None:
        """Cells the shown numbers prove safe (at most ``max_actions_per_turn``), or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return format_cells(self._proven()[0], ep.field.cols)

    def oracle_rationale(self) -> str | None:
        """Which number proves each cell the oracle reveals safe, or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        cells, reasons, mines = self._proven()
        return rationale.explain(ep.field, ep.hidden, cells, reasons, mines)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random cells."""
        rows, cols = self.config.size
        cells = [rng.randrange(rows * cols) for _ in range(rng.randint(1, self.config.max_actions_per_turn))]
        return f"<think>I will try {name(cells[0], cols)}.</think>\n" + format_cells(cells, cols)

    @property
    def field(self) -> Field:
        """Where the mines are (what the player does not see)."""
        return self._episode().field

    @property
    def revealed(self) -> frozenset[Cell]:
        """The cells revealed so far."""
        return frozenset(self._episode().revealed)

    # ----- helpers -----

    def _proven(self) -> tuple[list[Cell], dict[Cell, Reason], set[Cell]]:
        """Cells to reveal next, proven safe by the shown numbers, grouped by reason (at most
        :data:`MAX_REASONS` groups and ``max_actions_per_turn`` cells), with the reasons and the proven
        mines; where no number proves one (never on a generated field), a safe cell next to the open area
        that the oracle knows."""
        ep = self._episode()
        shown = {c: ep.field.numbers[c] for c in sorted(ep.revealed)}
        proof = deduce(ep.field.rows, ep.field.cols, shown)
        cells: list[Cell] = []
        reasons: list[Reason] = []
        for cell, reason in proof.safe.items():
            if len(cells) == self.config.max_actions_per_turn:
                break
            if reason not in reasons:
                if len(reasons) == MAX_REASONS:
                    continue
                reasons.append(reason)
            cells.append(cell)
        if cells:
            return cells, {c: proof.safe[c] for c in cells}, proof.mines
        nbrs = neighbours(ep.field.rows, ep.field.cols)
        hidden_safe = [
            c
            for c in range(ep.field.rows * ep.field.cols)
            if c not in ep.revealed and c not in ep.field.mines
        ]
        edge = [c for c in hidden_safe if any(n in ep.revealed for n in nbrs[c])]
        return [(edge or hidden_safe)[0]], {}, proof.mines

    def _state_text(self, ep: _Episode) -> str:
        """The field as the text view shows it (the mine hit ``X``) and where every mine is. No distance:
        the fewest turns of a player who sees only the numbers is a game no solver here plays exactly."""
        mines = ", ".join(name(c, ep.field.cols) for c in sorted(ep.field.mines))
        return f"{field_text(ep.field, ep.revealed, ep.hit)}\nMines: {mines}"

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        return field_image(ep.field, ep.revealed, ep.hit, self.config.cell_size)

    def _board_text(self) -> str:
        ep = self._episode()
        return field_text(ep.field, ep.revealed, ep.hit)

    def _status(self) -> str:
        ep = self._episode()
        left = self.config.turn_limit - ep.turns
        return f"Hidden cells: {ep.hidden}. Mines: {len(ep.field.mines)}. Turns left: {left}."

    def _instructions(self) -> str:
        cfg = self.config
        rows, cols = cfg.size
        rules = [
            f"This is Minesweeper on a {rows}x{cols} field with {cfg.mines} hidden mines. Reveal every cell "
            "that has no mine; revealing a mine loses the game.",
            "A revealed cell's number counts the mines among its up to eight neighbours (diagonals too); "
            "a cell with no number has none, and its neighbours open by themselves. The first reveal is "
            "made for you, and the numbers always prove a safe cell: no guess is needed.",
            f"Cells are named by column letter (A-{name(cols - 1, cols)[0]}) and row number (1-{rows}), "
            "for example C4.",
        ]
        return self._rules_header(
            rules,
            image_legend="In the image raised grey squares are hidden; flat squares are revealed.",
            text_legend="In the grid '#' is hidden, '.' a revealed cell with no mine next to it.",
            answer=(
                f"Answer with 1 to {cfg.max_actions_per_turn} cells to reveal inside <answer></answer>, for "
                f"example <answer>C4, D5</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(
        self, error: str | None, played: list[Cell], repeated: int, success: bool, truncated: bool
    ) -> str:
        ep = self._episode()
        text = "You revealed: " + (", ".join(name(c, ep.field.cols) for c in played) or "nothing new") + "."
        if repeated:
            text += f" {repeated} of your cells were already revealed."
        if ep.hit is not None:
            end: str | None = f"{name(ep.hit, ep.field.cols)} was a mine: you lost."
        else:
            end = ending(success, truncated, "Cleared: every safe cell is revealed!")
        return self._turn_header(error, "No cell was revealed this turn.", text, end)
