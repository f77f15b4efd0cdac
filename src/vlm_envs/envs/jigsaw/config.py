"""Jigsaw's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field

from vlm_envs.envs.config import ActionsPerTurn, RenderedConfig, RenderMode, TurnCap, location, turn_cap

#: The turn cap of a config that needs no more (:attr:`JigsawConfig.turn_limit`).
DEFAULT_MAX_TURNS = 8


class JigsawConfig(RenderedConfig):
    """Everything that defines a Jigsaw episode besides the seed."""

    #: ``difficulty``: tiles per side, position numbers on the picture, turns (medium: the defaults).
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"n": 2, "numbers": True, "max_turns": 8},
        "medium": {"n": 3, "numbers": True, "max_turns": 8},
        "hard": {"n": 4, "numbers": False, "max_turns": 6},
    }

    #: Tiles per side: the picture is cut into n x n tiles.
    n: int = Field(3, ge=2, le=4)
    #: Draw each tile's position number on the picture.
    numbers: bool = True
    #: A folder of the user's own images (PNG/JPEG/WebP), one picked by the seed from the sorted listing;
    #: None: a picture drawn from the seed.
    image_dir: str | None = location()
    render_mode: RenderMode = "vision"
    max_swaps_per_turn: ActionsPerTurn = 4
    #: ``None``: 8 turns, or the turns the oracle's longest episode takes where that is more (see
    #: :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Side of the (square) picture in pixels.
    image_size: int = Field(336, ge=64, le=1024)

    @property
    def turns_needed(self) -> int:
        """The turns the oracle's longest episode takes: it places a tile with each swap, so at most
        ``n * n - 1`` swaps, ``max_swaps_per_turn`` a turn."""
        return math.ceil((self.n * self.n - 1) / self.max_swaps_per_turn)

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else 8 or :attr:`turns_needed` where that is more."""
        return turn_cap(self.max_turns, DEFAULT_MAX_TURNS, self.turns_needed)
