"""The ``mark`` tool: its schema, the frame its points are given in, and reading a call's points.

A call is ``{"name": "mark", "arguments": {"points": [[x, y], ...]}}`` (one point ``[x, y]`` alone is taken
too), the points in picture pixels or, with ``coords: relative1000``, in 0-1000 of the picture (Qwen3-VL's
convention). A call is refused whole when any point is not two numbers inside the frame, or when it holds
more points than the marks left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from vlm_envs.envs.tool_calls import CallStatus, ToolCall, clip, format_tool_call

TOOL_NAME = "mark"
ARGUMENTS_EXAMPLE = '{"points": [[120, 80], [200, 310]]}'


@dataclass(frozen=True)
class Frame:
    """The frame of a call's points for a square picture of ``size`` px."""

    size: int
    coords: str

    @property
    def limit(self) -> int:
        """The largest coordinate of the frame."""
        return 1000 if self.coords == "relative1000" else self.size

    def words(self) -> str:
        if self.coords == "relative1000":
            return "0-1000 coordinates of the picture (0,0 top left, 1000,1000 bottom right)"
        return f"pixels of the picture ({self.size}x{self.size}, 0,0 top left)"

    def to_pixel(self, value: float) -> int:
        """The picture pixel (column or row) that a coordinate of the frame falls in."""
        return min(self.size - 1, math.floor(value * self.size / self.limit))

    def from_pixel(self, x: int, y: int) -> list[int]:
        """Whole coordinates of the frame that fall in pixel ``(x, y)`` (every pixel has some: sides are at
        most 896 < 1000)."""
        if self.coords != "relative1000":
            return [x, y]
        return [-(-x * 1000 // self.size), -(-y * 1000 // self.size)]


def schema(frame: Frame) -> dict[str, Any]:
    """The OpenAI function schema of ``mark`` in ``frame``."""
    return {
        "type": "function",
        "function": {
            "name": TOOL_NAME,
            "description": "Place numbered marks on the picture to keep track while counting; answers "
            "with the picture and every mark so far, and how many there are. Points are [x, y] in "
            f"{frame.words()}.",
            "parameters": {
                "type": "object",
                "properties": {
                    "points": {
                        "type": "array",
                        "items": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2},
                        "minItems": 1,
                    }
                },
                "required": ["points"],
            },
        },
    }


def call(points: list[list[int]]) -> str:
    """The text of a well-formed ``mark`` call on ``points`` (in the frame)."""
    return format_tool_call(TOOL_NAME, {"points": points})


def example_points(frame: Frame) -> list[list[int]]:
    """Fixed points for instructions (never chosen by the scene: the example must not give anything away)."""
    return [[frame.limit // 4, frame.limit // 8], [frame.limit // 2, frame.limit * 3 // 4]]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_points(call: ToolCall, frame: Frame, left: int) -> tuple[ToolCall, list[tuple[int, int]] | None]:
    """The call's points as picture pixels ``(x, y)``, or the call refused with the reason (``left``: marks
    that may still be placed)."""
    if not call.ok:
        return call, None

    def bad(why: str) -> tuple[ToolCall, None]:
        return call.rejected(CallStatus.BAD_ARGUMENTS, why), None

    raw = (call.arguments or {}).get("points")
    if isinstance(raw, list) and len(raw) == 2 and all(_number(v) for v in raw):
        raw = [raw]  # one point given alone
    if not isinstance(raw, list) or not raw:
        return bad('"points" must be a non-empty list of points [x, y]')
    if len(raw) > left:
        return bad(f"{len(raw)} points, but only {left} marks are left")
    pixels = []
    for point in raw:
        if not (isinstance(point, list) and len(point) == 2 and all(_number(v) for v in point)):
            return bad(f"each point must be two numbers [x, y], got {clip(str(point), 40)}")
        if not all(0 <= v <= frame.limit for v in point):
            return bad(f"the point {clip(str(point), 40)} is outside the picture (0 to {frame.limit})")
        pixels.append((frame.to_pixel(point[0]), frame.to_pixel(point[1])))
    return call, pixels
