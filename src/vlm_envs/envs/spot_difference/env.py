"""``SpotDifferenceEnv``: name the grid cells where altered copies of a drawn scene differ from it.

The first observation shows the original and its altered copies (two images, or three with ``altered: 2``)
under a labelled grid, and says how many cells differ. A reply with a ``<tool_call>`` of ``zoom`` gets a
``tool`` observation holding the same box of every image at full resolution; a bad call gets a ``tool``
observation saying what was wrong, with no image. A reply without a tool call is an answer, the cells in an
``<answer>`` block: the named set equal to the differing set ends the episode with reward 1.0; a wrong set is
told how many of its cells differ, and the model may look again and answer again until ``max_turns``
replies, after which the episode is truncated with reward 0.0.
"""

from __future__ import annotations

import dataclasses
import math
import random
import string
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.spot_difference import rationale, render
from vlm_envs.envs.spot_difference.cells import format_cells, parse_cells
from vlm_envs.envs.spot_difference.config import MIN_ZOOM_PX, SpotDifferenceConfig
from vlm_envs.envs.spot_difference.generator import Drawn, generate
from vlm_envs.envs.spot_difference.scene import SCALE, cell_box, cell_name
from vlm_envs.envs.tool_calls import CallStatus, ToolCall, box_tool, clip, format_tool_call, parse_tool_call
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance

TOOL_NAME = "zoom"
Box = tuple[float, float, float, float]


@dataclasses.dataclass
class _Episode:
    drawn: Drawn
    turn: int = 0
    zoom_calls: int = 0
    zooms_done: int = 0
    invalid_calls: int = 0
    answers: int = 0
    #: A zoom has shown a whole difference (the object as it is in the original and in its copy).
    zoom_hit: bool = False
    done: bool = False
    success: bool = False


class SpotDifferenceEnv(EpisodicEnv[SpotDifferenceConfig, _Episode]):
    """SpotDifference: name the grid cells where altered copies of a drawn scene differ from the original."""

    description: ClassVar[str] = "Name the grid cells where two drawn scenes differ, with a zoom tool on both"

    config_class = SpotDifferenceConfig

    # -- tool ---------------------------------------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        size = self.config.image_size
        return [
            box_tool(
                TOOL_NAME,
                "Zoom into the same box of every image and see it at higher resolution; "
                f"the box is [x0, y0, x1, y1] in pixels of the images ({size}x{size}, 0,0 top left).",
            )
        ]

    def zoom_call(self, box: Box) -> str:
        """The text of a well-formed ``zoom`` call on ``box`` (image px)."""
        return format_tool_call(TOOL_NAME, {"bbox": [round(v) for v in box]})

    # -- episode ------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new scene and its altered copies from ``seed``; ``options`` override config fields for this
        episode."""
        cfg = self._configure(options)
        seed = self._episode_seed(seed)
        self._ep = _Episode(generate(cfg, np.random.default_rng([seed, 0x5D1F])))
        scene = self._ep.drawn.scene
        info = {
            "seed": seed,
            "ground_truth": ", ".join(scene.names()),
            "kinds": [d.kind for d in scene.differences],
            "images": cfg.copies,
        }
        pieces: list[str | Image.Image] = []
        for i, image in enumerate(self._ep.drawn.images):
            pieces += [
                f"{'' if i == 0 else chr(10)}Image {i + 1}{' (the original)' if i == 0 else ''}:\n",
                image,
            ]
        return Observation.compose(*pieces, "\n" + self._instructions()), info

    def _instructions(self) -> str:
        cfg, ep = self.config, self._episode()
        count = len(ep.drawn.scene.differences)
        last = string.ascii_uppercase[cfg.grid - 1]
        if cfg.altered == 1:
            task = (
                f"Image 2 is a copy of image 1 changed in exactly {count} of the grid's cells"
                " (an object missing, recoloured, moved, resized or of another shape; never two changes in"
                " one cell). Name every cell where the images differ"
            )
        else:
            task = (
                "Images 2 and 3 are copies of image 1, each changed in some of the grid's cells (an object"
                " missing, recoloured, moved, resized or of another shape); together they differ from image 1"
                f" in exactly {count} cells, never two changes in one cell. Name every cell where image 2 or"
                " image 3 differs from image 1"
            )
        zoom = ""
        if cfg.max_zooms:
            example = self.zoom_call((0, 0, cfg.image_size // 2, cfg.image_size // 2))
            zoom = (
                "To compare details, zoom in with the zoom tool, giving a box [x0, y0, x1, y1] in pixels of"
                f" the images ({cfg.image_size}x{cfg.image_size}, 0,0 top left); it shows that box of every"
                f" image, for example: {example}\nYou may zoom {cfg.max_zooms} times. "
            )
        return (
            f"Spot the difference. The grid's columns are A to {last} and its rows 1 to {cfg.grid} (A1 top"
            f" left). {task}, for example <answer>{self._example()}</answer>.\n{zoom}You have {cfg.max_turns}"
            " replies in all; a wrong answer is told how many of its cells differ, and you may answer again."
        )

    def _example(self) -> str:
        return ", ".join(
            cell_name(self.config.grid, c) for c in (0, self.config.grid + 1)[: 1 + (self.config.grid > 1)]
        )

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer a ``zoom`` call with crops, or judge the answer (see the module docstring)."""
        ep = self._playing()
        ep.turn += 1
        call = parse_tool_call(response_text, arguments_example='{"bbox": [100, 100, 200, 200]}')
        if call.status is CallStatus.NONE:
            return self._answer(response_text)
        ep.zoom_calls += 1
        call, box = self._read_box(call.expecting({TOOL_NAME}))
        pieces: list[str | Image.Image]
        if box is None:
            ep.invalid_calls += 1
            example = self.zoom_call((0, 0, self.config.image_size // 2, self.config.image_size // 2))
            pieces = [f"zoom error: {call.error}. Example: {example}"]
        else:
            ep.zooms_done += 1
            ep.zoom_hit |= any(_contains(box, _changed_box(d)) for d in ep.drawn.scene.differences)
            shown = ", ".join(f"{v:g}" for v in box)
            pieces = [f"zoom [{shown}] ({ep.zooms_done} of {self.config.max_zooms} zooms used):"]
            for i, canvas in enumerate(ep.drawn.canvases):
                pieces += [f"\nImage {i + 1}:\n", render.crop(canvas, box, self.config)]
        truncated = ep.turn >= self.config.max_turns
        ep.done = truncated
        if truncated:
            pieces.append("\nThe reply limit is reached: the episode is over with no right answer.")
        elif ep.turn == self.config.max_turns - 1:
            pieces.append("\nYou have one reply left: reply without a tool call and name the cells.")
        info = {"tool_call": {"status": call.status.value, "name": call.name}, "tool_call_error": call.error}
        obs = Observation.compose(*pieces, role="tool")
        return self._binary_step(obs, False, truncated, self._metrics(), info)

    def _read_box(self, call: ToolCall) -> tuple[ToolCall, Box | None]:
        """The call's box in image px, or the call refused with the reason."""
        if not call.ok:
            return call, None
        ep, limit = self._episode(), self.config.image_size

        def bad(why: str) -> tuple[ToolCall, None]:
            return call.rejected(CallStatus.BAD_ARGUMENTS, why), None

        if ep.zooms_done >= self.config.max_zooms:
            return bad(f"all {self.config.max_zooms} zooms are used; name the cells")
        args = call.arguments or {}
        raw = args.get("bbox", args.get("bbox_2d"))
        if not isinstance(raw, list) or len(raw) != 4:
            return bad('"bbox" must be a list of 4 numbers [x0, y0, x1, y1]')
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in raw):
            return bad('"bbox" must hold 4 finite numbers')
        x0, y0, x1, y1 = (float(v) for v in raw)
        if min(x0, y0) < 0 or max(x1, y1) > limit:
            return bad(f"the box {clip(str(raw))} reaches outside the images (0 to {limit})")
        if x1 <= x0 or y1 <= y0:
            return bad("the box is inverted or empty: x1 must exceed x0 and y1 must exceed y0")
        if min(x1 - x0, y1 - y0) < MIN_ZOOM_PX:
            return bad(f"the box is under {MIN_ZOOM_PX} px on a side; make it larger")
        return call, (x0, y0, x1, y1)

    def _answer(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        ep, cfg = self._episode(), self.config
        parsed = parse_cells(response_text, cfg.grid)
        truth = set(ep.drawn.scene.cells)
        right = len(truth & set(parsed.cells))
        metrics = self._metrics()
        metrics["format_valid"] = parsed.error is None
        if parsed.error is not None:
            text = f"Invalid answer: {parsed.error}."
        else:
            ep.answers += 1
            ep.success = set(parsed.cells) == truth
            metrics.update(cells_named=len(parsed.cells), cells_right=right, answers=ep.answers)
            named = ", ".join(cell_name(cfg.grid, c) for c in parsed.cells)
            if ep.success:
                text = f"Right: the images differ in {named}."
            else:
                text = (
                    f"Not right: {right} of the {len(parsed.cells)} cells you named differ ({len(truth)} do)."
                )
        truncated = not ep.success and ep.turn >= cfg.max_turns
        ep.done = ep.success or truncated
        if ep.done:
            metrics["success"] = ep.success
        if truncated:
            text += " The episode is over: no replies are left."
        elif not ep.done:
            left = cfg.max_turns - ep.turn
            text += f" Look again: {left} {'reply' if left == 1 else 'replies'} left."
        info = {"ground_truth": ", ".join(ep.drawn.scene.names()) if ep.done else None, "error": parsed.error}
        return self._binary_step(Observation(text=text), ep.success, truncated, metrics, info)

    def _metrics(self) -> dict[str, float | int | bool]:
        ep = self._episode()
        return {
            "turn": ep.turn,
            "zoom_calls": ep.zoom_calls,
            "zoom_hit": ep.zoom_hit,
            "invalid_calls": ep.invalid_calls,
        }

    # -- where the episode stands -------------------------------------------------------------

    def _state_text(self, ep: _Episode) -> str:
        """The original's objects (cell, colour, shape, canvas box), each difference (cell, image, kind, the
        object there), whether a zoom has shown a difference, and whether the answer was right (a wrong
        answer changes nothing)."""
        scene, grid = ep.drawn.scene, self.config.grid
        objects = "; ".join(f"{cell_name(grid, c)} {o.described()} {list(o.box)}" for c, o in scene.objects)
        changes = "; ".join(
            f"{cell_name(grid, d.cell)} in image {d.copy + 1}: {d.kind}"
            + ("" if d.after is None else f", {d.after.described()} {list(d.after.box)}")
            for d in scene.differences
        )
        return (
            f"Grid: {grid}x{grid}, {self.config.copies} images\nImage 1: {objects}\nDifferences: {changes}\n"
            f"Zoomed in on a difference: {'yes' if ep.zoom_hit else 'no'}\n"
            f"Solved: {'yes' if ep.success else 'no'}"
        )

    def _distance(self, ep: _Episode) -> int:
        """A zoom on a difference, then the answer (no zoom where the config allows none); wrong answers may
        be retried, so it never becomes ``UNREACHABLE``."""
        return answer_distance(ep.success, lost=False, to_answer=1 if ep.zoom_hit or not self._zooms() else 2)

    def _zooms(self) -> bool:
        return self.config.max_zooms > 0 and self.config.max_turns > 1

    # -- reference and random players ---------------------------------------------------------

    def _oracle_zooms(self, ep: _Episode) -> bool:
        return not ep.zoom_hit and self._zooms() and ep.zooms_done < self.config.max_zooms

    def _oracle_box(self) -> tuple[int, int, int, int]:
        """The first difference's cell, image px."""
        x0, y0, x1, y1 = cell_box(self.config, self._episode().drawn.scene.differences[0].cell)
        return x0 // SCALE, y0 // SCALE, x1 // SCALE, y1 // SCALE

    def oracle_response(self) -> str | None:
        """The reference player: zooms on one difference's cell, then names every differing cell."""
        ep = self._unfinished()
        if ep is None:
            return None
        if self._oracle_zooms(ep):
            return f"Let me compare it up close. {self.zoom_call(self._oracle_box())}"
        return format_cells(self.config.grid, ep.drawn.scene.cells)

    def oracle_rationale(self) -> str | None:
        """What differs where, and why zoom there or why those cells; None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        if self._oracle_zooms(ep):
            return rationale.explain_zoom(ep.drawn.scene, self.config.copies, self._oracle_box())
        return rationale.explain_answer(ep.drawn.scene, self.config.copies, ep.zoom_hit)

    def random_response(self, rng: random.Random) -> str:
        """Plausible and broken replies drawn from ``rng``: zooms anywhere, guesses of as many cells as the
        question says, malformed calls and answers."""
        cfg = self.config
        ep = self._ep
        count = len(ep.drawn.scene.differences) if ep is not None else cfg.differences[0]
        guess = format_cells(cfg.grid, sorted(rng.sample(range(cfg.grid * cfg.grid), count)))
        side = rng.randint(MIN_ZOOM_PX, cfg.image_size // 2)
        x, y = rng.randint(0, cfg.image_size - side), rng.randint(0, cfg.image_size - side)
        return rng.choice(
            [
                f"Zooming. {self.zoom_call((x, y, x + side, y + side))}",
                f"The differences: {guess}",
                f"The differences: {guess}",
                format_tool_call(TOOL_NAME, {"bbox": [x + side, y, x, y + side]}),
                format_tool_call("crop", {"bbox": [0, 0, 10, 10]}),
                f"I think it is {guess.removeprefix('<answer>').removesuffix('</answer>')}.",
            ]
        )


def _changed_box(d: Any) -> Box:
    """The image-px box holding a difference's object in the original and in its copy."""
    boxes = [d.before.box] + ([] if d.after is None else [d.after.box])
    return (
        min(b[0] for b in boxes) / SCALE,
        min(b[1] for b in boxes) / SCALE,
        max(b[2] for b in boxes) / SCALE,
        max(b[3] for b in boxes) / SCALE,
    )


def _contains(outer: Box, inner: Box) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and outer[2] >= inner[2] and outer[3] >= inner[3]
