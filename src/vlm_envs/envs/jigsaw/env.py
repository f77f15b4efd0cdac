"""The Jigsaw env: put the shuffled tiles of a picture back in place by swapping positions.

Each turn shows the arrangement (tile positions numbered from 1, row-major) and the model answers
1 to ``max_swaps_per_turn`` swaps. A malformed answer costs the turn (no swap). The episode ends
when the picture is whole (terminated, reward 1.0) or after the turn cap (truncated; ``max_turns``, by
default enough turns for the oracle).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from vlm_envs.envs.board import BoardEnv, ending
from vlm_envs.envs.jigsaw import rationale
from vlm_envs.envs.jigsaw.actions import format_swaps, parse_swaps
from vlm_envs.envs.jigsaw.board import Board, in_place, optimal_swaps, oracle_swaps, shuffled, swap
from vlm_envs.envs.jigsaw.config import JigsawConfig
from vlm_envs.envs.jigsaw.picture import drawn_picture, image_files, user_picture
from vlm_envs.envs.jigsaw.render import arrangement_image, arrangement_text, tiles_of
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import turns_for


@dataclasses.dataclass
class _Episode:
    tiles: list[Image.Image]
    #: A digest of the picture's pixels: which picture the tiles cut.
    picture: str
    board: Board
    optimal_swaps: int
    swaps_used: int = 0
    turns: int = 0
    done: bool = False

    @property
    def success(self) -> bool:
        return in_place(self.board) == len(self.board)


class JigsawEnv(BoardEnv[JigsawConfig, _Episode]):
    """Jigsaw: swap the shuffled tiles of a picture back into place (drawn or the user's own images)."""

    config_class = JigsawConfig
    board_heading = "The tiles now:"

    def __init__(self, config: JigsawConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        if self.config.image_dir is not None:
            image_files(self.config.image_dir)  # a missing or empty folder is a config error, raised here

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A picture and a shuffle drawn from the seed; ``options`` override config fields once."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0x1165A])
        side = cfg.image_size - cfg.image_size % cfg.n
        info: dict[str, Any] = {"seed": seed}
        if cfg.image_dir is not None:
            files = image_files(cfg.image_dir)
            path = files[int(rng.integers(len(files)))]
            picture = user_picture(path, side)
            info["image"] = path.name
        else:
            picture = drawn_picture(side, rng)
        board = shuffled(cfg.n * cfg.n, rng)
        optimal = optimal_swaps(board)
        digest = hashlib.sha256(f"{picture.mode}{picture.size}".encode() + picture.tobytes()).hexdigest()
        self._ep = _Episode(tiles_of(picture, cfg.n), digest, board, optimal)
        info.update(board=list(board), optimal_swaps=optimal, n=cfg.n)
        return self._observation(self._instructions()), info

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Play the swaps in the reply's ``<answer>`` block (or spend the turn on a format error)."""
        ep = self._playing()
        cfg = self.config
        parsed = parse_swaps(response_text, len(ep.board), cfg.max_swaps_per_turn)
        ep.turns += 1
        for a, b in parsed.swaps:
            ep.board = swap(ep.board, a, b)
            ep.swaps_used += 1
            if ep.success:
                break
        success = ep.success
        truncated = not success and ep.turns >= cfg.turn_limit
        ep.done = success or truncated
        metrics: dict[str, float | int | bool] = {
            "format_valid": parsed.error is None,
            "tiles_in_place": in_place(ep.board),
            "swaps_used": ep.swaps_used,
        }
        if ep.done:
            metrics.update(success=success, optimal_swaps=ep.optimal_swaps)
        obs = self._observation(self._feedback(parsed.error, parsed.swaps, success, truncated))
        info = {"board": list(ep.board), "error": parsed.error}
        return self._binary_step(obs, success, truncated, metrics, info)

    def oracle_response(self) -> str | None:
        """The next optimal swaps (tiles minus cycles in all), or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return format_swaps(oracle_swaps(ep.board)[: self.config.max_swaps_per_turn])

    def oracle_rationale(self) -> str | None:
        """Which tiles are out of place and which ones the oracle's swaps put in place, or None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return rationale.explain(ep.board, oracle_swaps(ep.board)[: self.config.max_swaps_per_turn])

    def random_response(self, rng: random.Random) -> str:
        """A well-formed answer of random swaps."""
        tiles = self.config.n * self.config.n
        pairs = [rng.sample(range(tiles), 2) for _ in range(rng.randint(1, self.config.max_swaps_per_turn))]
        return "<think>Trying some swaps.</think>\n" + format_swaps([(a, b) for a, b in pairs])

    # ----- where the episode stands -----

    def _state_text(self, ep: _Episode) -> str:
        """The picture (a digest of its pixels) and the tile at each position."""
        return f"Picture: sha256:{ep.picture}\n{arrangement_text(ep.board, self.config.n)}"

    def _distance(self, ep: _Episode) -> int:
        """Turns of ``max_swaps_per_turn`` swaps, tiles minus cycles in all (no fewer swaps sort them)."""
        return turns_for(optimal_swaps(ep.board), self.config.max_swaps_per_turn)

    # ----- helpers -----

    def _board_image(self) -> Image.Image:
        ep, cfg = self._episode(), self.config
        return arrangement_image(ep.tiles, ep.board, cfg.n, cfg.numbers)

    def _board_text(self) -> str:
        return arrangement_text(self._episode().board, self.config.n)

    def _status(self) -> str:
        return f"Turns left: {self.config.turn_limit - self._episode().turns}."

    def _instructions(self) -> str:
        cfg = self.config
        tiles = cfg.n * cfg.n
        rules = [
            f"A picture was cut into {cfg.n}x{cfg.n} tiles and shuffled. "
            "Swap tiles until the picture is whole.",
            f"Positions are numbered 1 to {tiles}, left to right, top to bottom.",
        ]
        return self._rules_header(
            rules,
            image_legend=(
                "The image shows the tiles where they are now"
                + (", each position's number in its corner." if cfg.numbers else ".")
            ),
            text_legend=(
                "The grid gives, at each position, the number of the tile there; "
                "tile k belongs at position k."
            ),
            answer=(
                f"Answer with 1 to {cfg.max_swaps_per_turn} swaps of two positions inside <answer></answer>, "
                f"for example <answer>swap(1,{tiles}) swap(2,3)</answer>. You have {cfg.turn_limit} turns."
            ),
        )

    def _feedback(
        self, error: str | None, swaps: tuple[tuple[int, int], ...], success: bool, truncated: bool
    ) -> str:
        played = "You swapped: " + " ".join(f"swap({a + 1},{b + 1})" for a, b in swaps) + "."
        return self._turn_header(
            error,
            "No swap was played this turn.",
            played,
            ending(success, truncated, "The picture is whole!"),
        )
