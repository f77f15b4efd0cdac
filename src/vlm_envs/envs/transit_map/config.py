"""TransitMap's typed config, validated once where it enters (unknown keys are errors)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from vlm_envs.envs.config import MAX_IMAGE_SIDE, RenderedConfig, RenderMode, TurnCap, turn_cap
from vlm_envs.envs.transit_map.network import COLORS

#: The turn cap of a config whose longest trip needs no more.
DEFAULT_MAX_TURNS = 8


class TransitMapConfig(RenderedConfig):
    """Everything that defines a TransitMap episode besides the seed."""

    #: ``difficulty``: the network's size, how far the trip is, the rides to spare and how lines are named
    #: (medium: the defaults). Hard names its lines by number, so the legend must be read, and allows no ride
    #: beyond the fewest.
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "easy": {"grid": (6, 5), "lines": 3, "stops": (4, 6), "min_rides": 1, "ride_slack": 2},
        "medium": {"grid": (8, 6), "lines": 4, "stops": (5, 7), "min_rides": 2, "ride_slack": 1},
        "hard": {
            "grid": (11, 8),
            "lines": 7,
            "stops": (6, 9),
            "min_rides": 3,
            "ride_slack": 0,
            "line_names": "numbers",
        },
    }

    #: The lattice stops stand on: (columns, rows) of points.
    grid: tuple[int, int] = (8, 6)
    lines: int = Field(4, ge=1, le=len(COLORS))
    #: Stops per line: each line draws its length in this range (a line hemmed in by others may stop short).
    stops: tuple[int, int] = (5, 7)
    #: The destination is at least this many rides from the start (where the network drawn allows: after
    #: ``network.MAX_DRAWS`` networks without such a trip, the farthest trip found is taken).
    min_rides: int = Field(2, ge=1, le=4)
    #: Rides allowed beyond the fewest: an episode succeeds on arriving within the fewest + this many.
    ride_slack: int = Field(1, ge=0, le=20)
    #: ``colors``: a line is called by its colour (``Red line``); ``numbers``: by a number (``Line 3``) that
    #: only the legend ties to its colour (drawn per episode).
    line_names: Literal["colors", "numbers"] = "colors"
    render_mode: RenderMode = "vision"
    #: ``None``: 8, or the rides the longest trip may take where that is more (see :attr:`turn_limit`).
    max_turns: TurnCap | None = None
    #: Pixels between neighbouring lattice points.
    spacing: int = Field(80, ge=48, le=160)

    @model_validator(mode="after")
    def _check(self) -> TransitMapConfig:
        cols, rows = self.grid
        if not (3 <= cols <= 16 and 3 <= rows <= 12):
            raise ValueError(
                f"grid must be (cols, rows) with 3 to 16 columns and 3 to 12 rows, got {self.grid}"
            )
        low, high = self.stops
        if not 2 <= low <= high <= 12:
            raise ValueError(f"stops must be (min, max) with 2 <= min <= max <= 12, got {self.stops}")
        if self.lines * high > cols * rows:
            raise ValueError(
                f"{self.lines} lines of up to {high} stops need at least {self.lines * high} lattice points, "
                f"a {cols}x{rows} grid has {cols * rows}"
            )
        if self.min_rides > self.lines:
            raise ValueError(
                f"min_rides {self.min_rides} exceeds lines {self.lines} (a ride per line at most)"
            )
        if (cols + 1) * self.spacing > MAX_IMAGE_SIDE:
            raise ValueError(
                f"a {cols}-column grid at spacing {self.spacing} is wider than {MAX_IMAGE_SIDE} px"
            )
        return self

    @property
    def numbered(self) -> bool:
        """Whether lines are called by number."""
        return self.line_names == "numbers"

    @property
    def turn_limit(self) -> int:
        """The turn cap: ``max_turns``, else 8, or the rides the longest trip may take (one ride per line,
        plus ``ride_slack``) where that is more. A valid ride ends the episode once the rides allowed are
        used, so the cap ends a stream of invalid replies."""
        return turn_cap(self.max_turns, DEFAULT_MAX_TURNS, self.lines + self.ride_slack)
