"""KeysDoors' actions in ``<answer>Up, Up, Pickup, Right, Open</answer>`` (Sokoban's answer form).

``Up``, ``Down``, ``Left``, ``Right`` (or ``U``, ``D``, ``L``, ``R``) walk one cell; ``Pickup`` (``Pick up``,
``Pick``) takes the key lying on the player's cell; ``Open`` (``Toggle``, MiniGrid's name) opens the locked
doors next to the player whose keys it carries. Separators: commas, semicolons, spaces or newlines.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown
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


class ParsedActions(NamedTuple):
    """Action indices when the answer is well formed, else ``error`` says why."""

    actions: tuple[int, ...]
    error: str | None


def parse_actions(text: str, max_actions: int) -> ParsedActions:
    """Actions from the last ``<answer>`` block, 1 to ``max_actions`` of them."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedActions((), block.error)
    tokens = answer_tokens(_PICK_UP.sub("pickup", block.content))
    if not tokens:
        return ParsedActions((), "the answer holds no actions")
    if len(tokens) > max_actions:
        return ParsedActions((), f"{len(tokens)} actions given, at most {max_actions} per turn")
    actions = []
    for token in tokens:
        action = _WORDS.get(token.lower())
        if action is None:
            return ParsedActions((), f"{shown(token)!r} is not an action (use {', '.join(ACTION_NAMES)})")
        actions.append(action)
    return ParsedActions(tuple(actions), None)


def format_actions(actions: tuple[int, ...] | list[int]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>Up, Pickup</answer>``."""
    return "<answer>" + ", ".join(ACTION_NAMES[a] for a in actions) + "</answer>"
