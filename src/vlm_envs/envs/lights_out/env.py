"""The Lights Out env: press lights to turn the whole board dark; a press toggles a light and its four
neighbours.

Each turn shows the board (columns lettered from A, rows numbered from 1) and the model answers 1 to
``max_presses_per_turn`` lights to press, ``<answer>B2, C3</answer>``. A malformed answer costs the turn
(no press). The episode ends when every light is off (terminated, reward 1.0) or after the turn cap
(truncated; ``max_turns``, by default enough turns for the oracle). Boards are scrambled from a dark
one by distinct random presses, so every one is solvable; the oracle presses a smallest solution
(linear algebra over GF(2)).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any

from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.lights_out import rationale
from vlm_envs.envs.lights_out.actions import cell_name, format_presses, parse_presses
from vlm_envs.envs.lights_out.board import cells_of, fewest_presses, press, scramble
from vlm_envs.envs.lights_out.config import LightsOutConfig
from vlm_envs.envs.lights_out.render import board_image, board_text
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import UNREACHABLE, turns_for


@dataclasses.dataclass
class _Episode:
    lights: int
    optimal_presses: int
    presses: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return self.lights == 0


class LightsOutEnv(BoardEnv[LightsOutConfig, _Episode]):
    """Lights Out: press lights (each toggles itself and its neighbours) until the whole board is dark."""

    config_class = LightsOutConfig

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A board scrambled from the seed; ``options`` override config fields for this episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        lights = scramble(cfg.n, cfg.scramble_presses, seed)
        optimal = fewest_presses(cfg.n, lights).bit_count()
        self._ep = _Episode(lights, optimal)
        info = {
            "seed": seed,
            "lights": [cell_name(cfg.n, c) for c in cells_of(lights)],
            "optimal_presses": optimal,
        }
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Press the lights in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_presses(response_text, cfg.n, cfg.max_presses_per_turn)
        ep.turns += 1
        for cell in parsed.cells:
            ep.lights = press(cfg.n, ep.lights, cell)
            ep.presses += 1
        success = ep.success
        truncated = not success and ep.turns >= cfg.turn_limit
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "lights_on": ep.lights.bit_count(),
            "presses": ep.presses,
        }
        if ep.done:
            metrics.update(success=success, optimal_presses=ep.optimal_presses)
        obs = self._observation(self._feedback(parsed.error, parsed.cells, success, truncated))
        info = {"lights": [cell_name(cfg.n, c) for c in cells_of(ep.lights)], "error": parsed.error}
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next presses of a smallest solution, or None when done."""
        now = self._now()
        return None if now is None else format_presses(self.config.n, now[1])

    def oracle_rationale(self) -> str | None:
        """The lights that are on, a smallest solution and the presses made now; None when done."""
        now = self._now()
        ep = self._ep
        if now is None or ep is None:
            return None
        return rationale.explain(self.config.n, ep.lights, *now)

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random presses."""
        n = self.config.n
        cells = [rng.randrange(n * n) for _ in range(rng.randint(1, self.config.max_presses_per_turn))]
        return f"<think>Let me press {cell_name(n, cells[0])}.</think>\n" + format_presses(n, cells)

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The board: which lights are on."""
        return board_text(self.config.n, ep.lights)

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_presses_per_turn`` presses of a smallest solution (no fewer presses turn every
        light off, and presses commute); ``UNREACHABLE`` for a board no presses clear."""
        try:
            presses = fewest_presses(self.config.n, ep.lights).bit_count()
        except ValueError:
            return UNREACHABLE
        return turns_for(presses, self.config.max_presses_per_turn)

    # ----- helpers -----

    def _now(self) -> tuple[int, list[int]] | None:
        """A smallest solution from here and its presses made this turn; None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        solution = fewest_presses(self.config.n, ep.lights)
        return solution, cells_of(solution)[: self.config.max_presses_per_turn]

    def _board_image(self) -> Image.Image:
        return board_image(self.config.n, self._episode().lights, self.config.cell_size)

    def _board_text(self) -> str:
        return board_text(self.config.n, self._episode().lights)

    def _status(self) -> str:
        ep = self._episode()
        return f"Lights on: {ep.lights.bit_count()}. Turns left: {self.config.turn_limit - ep.turns}."

    def _instructions(self) -> str:
        cfg = self.config
        last = cell_name(cfg.n, cfg.n * cfg.n - 1)
        rules = [
            f"Lights Out on a {cfg.n}x{cfg.n} board. Pressing a light toggles it and its neighbours above, "
            "below, left and right (on becomes off, off becomes on). Turn every light off.",
            f"Lights are named by column letter and row number, A1 (top left) to {last} (bottom right).",
        ]
        return self._rules_header(
            rules,
            image_legend="In the image: yellow lights are on, grey ones are off.",
            text_legend="In the text board: O is on, . is off.",
            answer=(
                f"Answer with 1 to {cfg.max_presses_per_turn} lights to press inside <answer></answer>, for "
                f"example <answer>A1, B2</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(self, error: str | None, cells: tuple[int, ...], success: bool, truncated: bool) -> str:
        played = "You pressed: " + ", ".join(cell_name(self.config.n, c) for c in cells) + "."
        return self._turn_header(
            error,
            "No light was pressed this turn.",
            played,
            ending(success, truncated, "Every light is off!"),
        )
