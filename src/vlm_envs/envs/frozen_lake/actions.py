"""FrozenLake's actions in ``<answer>Left, Down</answer>`` (VAGEN's answer form): ``Left``, ``Down``,
``Right``, ``Up`` or ``L``/``D``/``R``/``U``, separated by commas, semicolons, spaces or newlines."""

from __future__ import annotations

from typing import NamedTuple

from vlm_envs.envs.answers import answer_block, answer_tokens, shown

#: Action names in gymnasium's order (the index is the action).
ACTION_NAMES = ("Left", "Down", "Right", "Up")
_WORDS = {name.lower(): i for i, name in enumerate(ACTION_NAMES)} | {
    name[0].lower(): i for i, name in enumerate(ACTION_NAMES)
}


class ParsedActions(NamedTuple):
    """Action indices when the answer is well formed, else ``error`` says why."""

    actions: tuple[int, ...]
    error: str | None


def parse_actions(text: str, max_actions: int) -> ParsedActions:
    """Actions from the last ``<answer>`` block, 1 to ``max_actions`` of them."""
    block = answer_block(text)
    if block.error is not None:
        return ParsedActions((), block.error)
    tokens = answer_tokens(block.content)
    if not tokens:
        return ParsedActions((), "the answer holds no actions")
    if len(tokens) > max_actions:
        return ParsedActions((), f"{len(tokens)} actions given, at most {max_actions} per turn")
    actions = []
    for token in tokens:
        action = _WORDS.get(token.lower())
        if action is None:
            return ParsedActions((), f"{shown(token)!r} is not an action (use Left, Down, Right or Up)")
        actions.append(action)
    return ParsedActions(tuple(actions), None)


def format_actions(actions: tuple[int, ...] | list[int]) -> str:
    """An ``<answer>`` block, e.g. ``<answer>Left, Down</answer>``."""
    return "<answer>" + ", ".join(ACTION_NAMES[a] for a in actions) + "</answer>"
