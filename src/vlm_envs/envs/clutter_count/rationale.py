"""ClutterCount's oracle rationale: what counts, how many there are and how many are partly hidden, and why
the reference player marks them or answers now."""

from __future__ import annotations

from vlm_envs.envs.clutter_count.generator import Scene
from vlm_envs.envs.clutter_count.shapes import PLURALS


def _hidden(scene: Scene) -> str:
    hidden = scene.partly_hidden()
    return "none of them hidden" if not hidden else f"{hidden} of them partly hidden behind other shapes"


def _what(scene: Scene) -> str:
    return f"{scene.color} shapes of other kinds and {PLURALS[scene.kind]} of other colours do not count"


def explain_marks(scene: Scene, again: bool) -> str:
    """Why mark now (``again``: some marks are placed already; the targets without one are marked)."""
    which = "each one without a mark yet" if again else "each one"
    return (
        f"I find {scene.count} {scene.asked()}, {_hidden(scene)}; {_what(scene)}. I mark the centre of "
        f"{which}, so that none is missed or counted twice."
    )


def explain_answer(scene: Scene, covered: bool) -> str:
    """Why the final answer is the count (``covered``: every target carries a mark)."""
    if covered:
        return (
            f"Every one of the {scene.count} {scene.asked()} carries a mark ({_hidden(scene)}), so the count "
            f"is {scene.count}."
        )
    return f"I count {scene.count} {scene.asked()}, {_hidden(scene)}; {_what(scene)}."
