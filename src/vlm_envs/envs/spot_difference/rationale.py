"""SpotDifference's oracle rationale: what differs in each differing cell, why zoom where it zooms, and the
answer those cells make."""

from __future__ import annotations

from vlm_envs.envs.phrasing import counted, series
from vlm_envs.envs.spot_difference.scene import Difference, Scene, cell_name


def _image(copy: int, copies: int) -> str:
    return "the copy" if copies == 2 else f"image {copy + 1}"


def difference(grid: int, d: Difference, copies: int) -> str:
    """One difference in words: ``in B2 the red circle is blue in the copy``."""
    where, image, before = cell_name(grid, d.cell), _image(d.copy, copies), d.before.described()
    if d.after is None:
        return f"in {where} the {before} is missing from {image}"
    if d.kind == "recoloured":
        return f"in {where} the {before} is {d.after.color} in {image}"
    if d.kind == "reshaped":
        return f"in {where} the {before} is a {d.after.shape} in {image}"
    if d.kind == "resized":
        bigger = "larger" if d.after.side > d.before.side else "smaller"
        return f"in {where} the {before} is {bigger} in {image}"
    return f"in {where} the {before} has moved in {image}"


def _found(scene: Scene, copies: int) -> str:
    diffs = [difference(scene.grid, d, copies) for d in scene.differences]
    return f"Comparing the images cell by cell, {counted(len(diffs), 'cell')} differ: {'; '.join(diffs)}."


def explain_zoom(scene: Scene, copies: int, box: tuple[int, int, int, int]) -> str:
    """Why zoom into ``box`` (the first difference's cell, image px)."""
    first = cell_name(scene.grid, scene.differences[0].cell)
    shown = ", ".join(str(v) for v in box)
    return f"{_found(scene, copies)} I zoom into {first}, [{shown}], to compare it up close."


def explain_answer(scene: Scene, copies: int, zoomed: bool) -> str:
    """Why the answer is the differing cells (``zoomed``: a zoom showed one of them)."""
    seen = " The zoom confirmed one up close." if zoomed else ""
    return f"{_found(scene, copies)}{seen} So the differing cells are {series(scene.names())}."
