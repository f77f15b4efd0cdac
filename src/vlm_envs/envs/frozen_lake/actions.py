"""FrozenLake's actions in ``<answer>Left, Down</answer>`` (VAGEN's answer form): ``Left``, ``Down``,
``Right``, ``Up`` or ``L``/``D``/``R``/``U``, separated by commas, semicolons, spaces or newlines."""

from __future__ import annotations

from vlm_envs.envs.answers import ParsedActions, parse_named_actions

#: Action names in gymnasium's order (the index is the action).
ACTION_NAMES = ("Left", "Down", "Right", "Up")
_WORDS = {name.lower(): i for i, name in enumerate(ACTION_NAMES)} | {
    name[0].lower(): i for i, name in enumerate(ACTION_NAMES)
}


def parse_actions(text: str, max_actions: int) -> ParsedActions:
    """Actions from the last ``<answer>`` block, 1 to ``max_actions`` of them."""
    return parse_named_actions(text, _WORDS, max_actions, "Left, Down, Right or Up")


def format_actions(actions: tuple[int, ...] | list[int]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>Left, Down</answer>``."""
    return "<answer>" + ", ".join(ACTION_NAMES[a] for a in actions) + "</answer>"
