"""ZoomSearch's oracle rationale: where the named object is and why zoom there, or what the zoom showed."""

from __future__ import annotations

from vlm_envs.envs.zoom_search.generator import SceneObject

_ROWS = ("top", "middle", "bottom")
_COLUMNS = ("left", "centre", "right")


def explain_zoom(target: SceneObject, box: tuple[float, float, float, float], limit: int) -> str:
    """Why zoom into ``box`` (the target's box in the tool's frame, ``0..limit`` each way)."""
    column = _COLUMNS[min(2, int(3 * (box[0] + box[2]) / 2 / limit))]
    row = _ROWS[min(2, int(3 * (box[1] + box[3]) / 2 / limit))]
    where = "centre" if (row, column) == ("middle", "centre") else f"{row} {column}"
    shown = ", ".join(f"{v:g}" for v in box)
    return (
        f"I need the code on the {target.color} {target.shape}, the only one of that colour and shape. "
        f"It is in the {where} of the image, inside [{shown}]. Its code is too small to read here, "
        "so I zoom into that box."
    )


def explain_answer(target: SceneObject, zoomed: bool) -> str:
    """Why the final answer is the target's code (``zoomed``: a zoom showed the whole code plate)."""
    if zoomed:
        return f"The zoomed view shows the {target.color} {target.shape} and its code: {target.code}."
    return f"The code on the {target.color} {target.shape} is {target.code}."
