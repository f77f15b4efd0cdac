"""The PolyominoPacking env: cover a region of a grid exactly with a set of polyomino pieces.

Each turn shows the board (the region outlined on a grid, rows and columns numbered from 1 at the top
left, placed pieces in their colours) and every piece as drawn beside it under its letter. The model
answers one action: ``<answer>piece B, rotate 90, at row 2 col 3</answer>`` places piece B turned 90
degrees clockwise from how it is drawn with the top-left cell of its bounding box at row 2, column 3
(``mirror`` before ``rotate`` flips it left to right first, where the config allows mirroring), or
``<answer>remove B</answer>`` takes B back (where the config allows removals). A placement off the region,
over another piece or of a piece already placed is refused (``action_valid`` false, nothing changes); a
malformed answer costs the turn. The episode ends when the region is covered (terminated, reward 1.0) or
after the turn cap (truncated). Levels are carved from the region, so each can be packed.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.polyomino_packing import rationale
from vlm_envs.envs.polyomino_packing.actions import Action, describe, format_action, letter, parse_action
from vlm_envs.envs.polyomino_packing.config import PolyominoPackingConfig
from vlm_envs.envs.polyomino_packing.generator import Level, generate
from vlm_envs.envs.polyomino_packing.render import board_image, board_text
from vlm_envs.envs.polyomino_packing.rules import (
    Plan,
    covered,
    fitting,
    next_action,
    plan,
    played,
    refusal,
)
from vlm_envs.envs.polyomino_packing.shapes import ROTATIONS, Cell
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE


@dataclasses.dataclass
class _Episode:
    level: Level
    placed: dict[int, tuple[Cell, ...]] = dataclasses.field(default_factory=dict)
    #: The oracle's plan per position met (positions recur: a piece placed and taken back).
    plans: dict[tuple[tuple[int, tuple[Cell, ...]], ...], Plan] = dataclasses.field(default_factory=dict)
    placements: int = 0
    removals: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return len(self.placed) == len(self.level.pieces)


class PolyominoPackingEnv(BoardEnv[PolyominoPackingConfig, _Episode]):
    """PolyominoPacking: cover a region exactly with polyomino pieces, turned (and mirrored) as needed."""

    config_class = PolyominoPackingConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A level carved from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x9017])
        level = generate(cfg.shape, cfg.pieces, cfg.min_size, cfg.max_size, cfg.mirror, rng)
        self._ep = _Episode(level)
        info = {
            "seed": seed,
            "board": self._board_text(),
            "solution": {letter(p): [list(c) for c in cells] for p, cells in enumerate(level.solution)},
            "optimal_placements": len(level.pieces),
            "distance_exact": level.packings is not None,
            "attempt": level.attempt,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the action in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_action(response_text)
        ep.turns += 1
        refused = None
        if parsed.action is not None:
            refused = refusal(ep.level, ep.placed, parsed.action, cfg.mirror, cfg.removals)
            if refused is None:
                ep.placed = played(ep.level, ep.placed, parsed.action)
                if parsed.action.remove:
                    ep.removals += 1
                else:
                    ep.placements += 1
        success = ep.success
        truncated = not success and ep.turns >= cfg.turn_limit
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "action_valid": parsed.error is None and refused is None,
            "pieces_placed": len(ep.placed),
            "placements": ep.placements,
            "removals": ep.removals,
        }
        if ep.done:
            metrics.update(success=success, optimal_placements=len(ep.level.pieces))
        obs = self._observation(self._feedback(parsed.error, parsed.action, refused, success, truncated))
        info = {"error": parsed.error, "refused": refused, "board": self._board_text()}
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next action toward a packing that keeps most placed pieces; ``None`` when done or when no
        packing can be reached (a piece out of place where pieces may not be taken back)."""
        action = self._oracle_action()
        return None if action is None else format_action(action)

    def oracle_rationale(self) -> str | None:
        """What is left and why the oracle's action comes next, or None when it has none."""
        action = self._oracle_action()
        if action is None:
            return None
        ep = self._episode()
        known = self._plan()
        cells = ep.placed[action.piece] if action.remove else covered(ep.level, action)
        left = [p for p in range(len(ep.level.pieces)) if p not in ep.placed]
        free = len(ep.level.region) - sum(len(c) for c in ep.placed.values())
        return rationale.explain(free, left, len(ep.placed), known.kept, action, cells, known.actions)

    def random_response(self, rng: random.Random) -> str:
        """A random action the rules allow: now and then a placed piece taken back (where allowed), else an
        unplaced piece put at random where it fits; where none fits anywhere, a piece taken back, or one put
        anywhere on the board (refused)."""
        ep, cfg = self._episode(), self.config
        placed = sorted(ep.placed)
        unplaced = [p for p in range(len(ep.level.pieces)) if p not in ep.placed]
        moves = [a for p in unplaced for a in fitting(ep.level, ep.placed, p, cfg.mirror)]
        if placed and cfg.removals and (not moves or rng.random() < 0.2):
            action = Action(rng.choice(placed), remove=True)
        elif moves:
            piece = rng.choice(sorted({a.piece for a in moves}))
            action = rng.choice([a for a in moves if a.piece == piece])
        else:
            action = Action(
                rng.choice(unplaced or placed),
                False,
                rng.choice(ROTATIONS),
                cfg.mirror and rng.random() < 0.5,
                rng.randrange(ep.level.rows),
                rng.randrange(ep.level.cols),
            )
        return f"<think>I will try piece {letter(action.piece)}.</think>\n" + format_action(action)

    @property
    def level(self) -> Level:
        return self._episode().level

    @property
    def placed(self) -> dict[int, tuple[Cell, ...]]:
        """Each placed piece's cells (0 is A)."""
        return dict(self._episode().placed)

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board (the region, each placed piece's cells) and every piece's shape as drawn."""
        level = ep.level
        return board_text(level.rows, level.cols, level.region, level.pieces, ep.placed)

    def _distance(self, ep: _Episode) -> int | None:
        """Actions (one a turn) to a full packing: take back each piece the packing that keeps the most
        moves, then place the rest (without removals: the pieces left, or ``UNREACHABLE``); ``None`` where
        the level's packings were past the search budget."""
        return self._plan().actions

    # ----- helpers -----

    def _plan(self) -> Plan:
        ep = self._episode()
        key = tuple(ep.placed.items())
        known = ep.plans.get(key)
        if known is None:
            known = ep.plans[key] = plan(ep.level, ep.placed, self.config.removals)
        return known

    def _oracle_action(self) -> Action | None:
        ep = self._unfinished()
        if ep is None:
            return None
        known = self._plan()
        if known.actions == UNREACHABLE:
            return None
        action = next_action(ep.level, ep.placed, known.target, self.config.mirror)
        if action is not None and action.remove and not self.config.removals:
            return None  # the generator's packing moves a piece that must stay (its packings unknown)
        return action

    def _board_image(self) -> Image.Image:
        ep = self._episode()
        level = ep.level
        return board_image(
            level.rows, level.cols, level.region, level.pieces, ep.placed, self.config.cell_size
        )

    def _board_text(self) -> str:
        return self._state_text(self._episode())

    def _status(self) -> str:
        ep = self._episode()
        left = self.config.turn_limit - ep.turns
        return f"Pieces placed: {len(ep.placed)} of {len(ep.level.pieces)}. Turns left: {left}."

    def _instructions(self) -> str:
        cfg = self.config
        level = self._episode().level
        count = len(level.pieces)
        rules = [
            f"Cover the region exactly with the {count} pieces A to {letter(count - 1)}: "
            "every cell of the region under one piece, no piece outside it, no two pieces overlapping. "
            f"The board has {level.rows} rows and {level.cols} columns, numbered from 1 at the top left.",
            "Place one piece a turn: name it, how far to turn it clockwise from how it is drawn (0, 90, 180 "
            "or 270 degrees), and the row and column where the turned piece's top row and leftmost column "
            "go (the top-left corner of the smallest rectangle around it, which may be a cell the piece "
            "leaves empty).",
        ]
        if cfg.mirror:
            rules.append(
                "A piece may be mirrored too: 'mirror', written before 'rotate', flips it left to right "
                "as drawn, and then it is turned."
            )
        rules.append(
            "'remove B' takes piece B back off the board."
            if cfg.removals
            else "A placed piece stays where it is: it cannot be taken back."
        )
        return self._rules_header(
            rules,
            image_legend=(
                "In the image the region is the cream area inside the thick outline (grey cells are "
                "outside it); placed pieces show their colour and letter. Every piece is drawn on the "
                "right under its letter as it is at rotate 0 (a placed one faded)."
            ),
            text_legend=(
                "In the text board '.' is a free cell of the region, '#' a cell outside it and a letter a "
                "cell of that placed piece; every piece is listed as drawn at rotate 0, '#' its cells."
            ),
            answer=(
                "Answer with one action inside <answer></answer>, for example <answer>piece B, rotate 90, "
                "at row 2 col 3</answer>"
                + (" or <answer>piece B, mirror, rotate 90, at row 2 col 3</answer>" if cfg.mirror else "")
                + (" or <answer>remove B</answer>" if cfg.removals else "")
                + f". You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(
        self, error: str | None, action: Action | None, refused: str | None, success: bool, truncated: bool
    ) -> str:
        if action is None:
            text = ""
        elif refused is not None:
            text = f"Not played: {refused}. Nothing changed this turn."
        elif action.remove:
            text = f"You took piece {letter(action.piece)} back."
        else:
            cells = self._episode().placed[action.piece]
            text = f"You placed {describe(action)}: it covers {rationale.cells_named(cells)} (row, column)."
        return self._turn_header(
            error,
            "Nothing changed this turn.",
            text,
            ending(success, truncated, "Solved: the region is covered!"),
        )
