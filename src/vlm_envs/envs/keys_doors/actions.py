"""KeysDoors' actions in ``<answer>Up, Up, Pickup, Right, Open</answer>`` (Sokoban's answer form).

``Up``, ``Down``, ``Left``, ``Right`` (or ``U``, ``D``, ``L``, ``R``) walk one cell; ``Pickup`` (``Pick up``,
``Pick``) takes the key lying on the player's cell; ``Open`` (``Toggle``, MiniGrid's name) opens the locked
doors next to the player whose keys it carries. Separators: commas, semicolons, spaces or newlines.
"""

from __future__ import annotations

import re

from vlm_envs.envs.answers import ParsedActions, parse_named_actions
from vlm_envs.envs.keys_doors.world import ACTION_NAMES, DOWN, LEFT, OPEN, PICKUP, RIGHT, UP

_WORDS = {
    "up": UP,
    "u": UP,
    "down": DOWN,
    "d": DOWN,
    "left": LEFT,
    "l": LEFT,
    "right": RIGHT,
    "r": RIGHT,
    "pickup": PICKUP,
    "pick": PICKUP,
    "open": OPEN,
    "toggle": OPEN,
}
_PICK_UP = re.compile(r"pick[\s_-]+up", re.IGNORECASE)


def parse_actions(text: str, max_actions: int) -> ParsedActions:
    """Actions from the last ``<answer>`` block, 1 to ``max_actions`` of them."""
    return parse_named_actions(text, _WORDS, max_actions, ", ".join(ACTION_NAMES), _joined)


def _joined(content: str) -> str:
    """``Pick up`` written as the one word ``pickup``."""
    return _PICK_UP.sub("pickup", content)


def format_actions(actions: tuple[int, ...] | list[int]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>Up, Pickup</answer>``."""
    return "<answer>" + ", ".join(ACTION_NAMES[a] for a in actions) + "</answer>"
