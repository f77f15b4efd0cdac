"""FogMaze's actions and their spelling in ``<answer>Up, Left</answer>`` (Sokoban's answer form).

``local`` view: ``Up``/``Right``/``Down``/``Left`` (or ``U``/``R``/``D``/``L``) move one cell.
``first_person`` view: ``Forward`` (``F``), ``TurnLeft`` (``Turn Left``, ``TL``) and ``TurnRight``
(``Turn Right``, ``TR``). Separators: commas, semicolons, spaces or newlines.
"""

from __future__ import annotations

import re
from typing import Literal

from vlm_envs.envs.answers import ParsedActions, parse_named_actions

View = Literal["local", "first_person"]

#: Action names per view; in ``local`` an action is the index of its direction in maze.DIRECTIONS.
ACTION_NAMES: dict[str, tuple[str, ...]] = {
    "local": ("Up", "Right", "Down", "Left"),
    "first_person": ("Forward", "TurnLeft", "TurnRight"),
}
FORWARD, TURN_LEFT, TURN_RIGHT = 0, 1, 2
_WORDS: dict[str, dict[str, int]] = {
    "local": {"up": 0, "u": 0, "right": 1, "r": 1, "down": 2, "d": 2, "left": 3, "l": 3},
    "first_person": {"forward": 0, "f": 0, "turnleft": 1, "tl": 1, "turnright": 2, "tr": 2},
}
_TURN = re.compile(r"turn[\s_-]+(?=left|right)", re.IGNORECASE)


def parse_actions(text: str, view: View, max_actions: int) -> ParsedActions:
    """Actions from the last ``<answer>`` block, 1 to ``max_actions`` of them."""
    return parse_named_actions(text, _WORDS[view], max_actions, ", ".join(ACTION_NAMES[view]), _joined)


def _joined(content: str) -> str:
    """``Turn Left`` written as the one word ``turnleft`` (and right)."""
    return _TURN.sub("turn", content)


def format_actions(actions: tuple[int, ...] | list[int], view: View) -> str:
    """An ``<answer>`` block, e.g. ``<answer>Up, Left</answer>``."""
    return "<answer>" + ", ".join(ACTION_NAMES[view][a] for a in actions) + "</answer>"
