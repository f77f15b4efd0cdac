"""``ZoomSearchEnv``: find one object on a large canvas and read its code through a ``zoom`` tool.

The first observation is the whole canvas scaled to ``view``, where the codes are unreadable. A reply with
a ``<tool_call>`` of ``zoom`` gets a ``tool`` observation holding the crop (scaled to fit ``crop_view``)
and the box in words; a bad call gets a ``tool`` observation saying what was wrong, with no image. A reply
without a tool call is the final answer: its last ``\\boxed{}``, compared with the code after normalising
case and spaces. The reward is 1.0 (plus ``tool_bonus`` when a zoom was used) or 0.0; the episode is cut
(reward 0) after ``max_turns`` replies.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.tool_calls import CallStatus, ToolCall, box_tool, clip, format_tool_call, parse_tool_call
from vlm_envs.envs.zoom_search import rationale, renderer
from vlm_envs.envs.zoom_search.config import MIN_ZOOM_PX, ZoomSearchConfig
from vlm_envs.envs.zoom_search.generator import Scene, generate_scene
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance
from vlm_envs.verify import extract_boxed

TOOL_NAME = "zoom"
Box = tuple[float, float, float, float]


@dataclasses.dataclass
class _Episode:
    scene: Scene
    canvas: Image.Image
    view: Image.Image
    turn: int = 0
    zoom_calls: int = 0
    zooms_done: int = 0
    invalid_calls: int = 0
    zoom_hit: bool = False
    #: A final answer (a reply without a tool call) ended the episode.
    answered: bool = False
    done: bool = False
    success: bool = False
    answer: str | None = None


def _normal(text: str) -> str:
    return "".join(text.split()).upper()


class ZoomSearchEnv(EpisodicEnv[ZoomSearchConfig, _Episode]):
    """ZoomSearch: a crowded canvas, one object named by colour and shape, its code legible only zoomed in."""

    description: ClassVar[str] = "Find an object on a large canvas and read its tiny code with a zoom tool"

    config_class = ZoomSearchConfig

    # -- tool ---------------------------------------------------------------------------------

    def _frame(self) -> tuple[int, str]:
        if self.config.coords == "relative1000":
            return 1000, "0-1000 coordinates of the first image (0,0 top left, 1000,1000 bottom right)"
        return (
            self.config.view,
            f"pixels of the first image ({self.config.view}x{self.config.view}, 0,0 top left)",
        )

    def tools(self) -> list[dict[str, Any]]:
        _, frame = self._frame()
        return [
            box_tool(
                TOOL_NAME,
                "Zoom into a box of the first image and see it at higher resolution; "
                f"the box is [x0, y0, x1, y1] in {frame}.",
            )
        ]

    def zoom_call(self, box: Box) -> str:
        """The text of a well-formed ``zoom`` call on ``box`` (in the configured frame)."""
        return format_tool_call(TOOL_NAME, {"bbox": [round(v) for v in box]})

    # -- episode ------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new scene from ``seed``; ``options`` override config fields for this episode."""
        self._configure(options)
        seed = self._episode_seed(seed)
        scene = generate_scene(self.config, np.random.default_rng([seed, 0x200A]))
        canvas = renderer.draw_canvas(scene, self.config)
        view = renderer.draw_view(canvas, scene, self.config)
        self._ep = _Episode(scene, canvas, view)
        target = scene.target_object
        info = {
            "seed": seed,
            "target": scene.question(),
            "ground_truth": target.code,
            "objects": len(scene.objects),
        }
        return Observation.compose(view, "\n" + self._instructions()), info

    def _instructions(self) -> str:
        cfg, ep = self.config, self._episode()
        _, frame = self._frame()
        example = self.zoom_call(self._example_box())
        return (
            f"Find {ep.scene.question()} in the image; no other object has that colour and shape. What is "
            f"the {cfg.code_length}-character code written on it?\nThe code is too small to read here. Zoom "
            f"in with the zoom tool, giving a box [x0, y0, x1, y1] in {frame}, for example: {example}\n"
            f"You may zoom {cfg.max_zooms} times and have {cfg.max_turns} replies in all. When you are done, "
            "reply without a tool call and put the code in \\boxed{}."
        )

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer a ``zoom`` call with a crop, or check the final answer (see the module docstring)."""
        ep = self._playing()
        ep.turn += 1
        call = parse_tool_call(response_text, arguments_example='{"bbox": [100, 200, 300, 400]}')
        if call.status is CallStatus.NONE:
            return self._final(response_text)
        ep.zoom_calls += 1
        call, box = self._read_box(call.expecting({TOOL_NAME}))
        pieces: list[str | Image.Image]
        if box is None:
            ep.invalid_calls += 1
            pieces = [f"zoom error: {call.error}. Example: {self.zoom_call(self._example_box())}"]
        else:
            ep.zooms_done += 1
            view_box = self._to_view(box)
            ep.zoom_hit |= _contains(view_box, self._target_plate())
            image = renderer.crop(ep.canvas, ep.view, view_box, self.config)
            shown = ", ".join(f"{v:g}" for v in box)
            pieces = [f"zoom [{shown}] ({ep.zooms_done} of {self.config.max_zooms} zooms used):\n", image]
        truncated = ep.turn >= self.config.max_turns
        ep.done = truncated
        if truncated:
            pieces.append("\nThe reply limit is reached: the episode is over with no final answer.")
        elif ep.turn == self.config.max_turns - 1:
            pieces.append(
                "\nYou have one reply left: reply without a tool call and give the code in \\boxed{}."
            )
        info = {"tool_call": {"status": call.status.value, "name": call.name}, "tool_call_error": call.error}
        obs = Observation.compose(*pieces, role="tool")
        return obs, ep.done, self._info(truncated=truncated, info=info)

    def _read_box(self, call: ToolCall) -> tuple[ToolCall, Box | None]:
        """The call's box in the configured frame, or the call refused with the reason."""
        if not call.ok:
            return call, None
        ep, limit = self._episode(), self._frame()[0]

        def bad(why: str) -> tuple[ToolCall, None]:
            return call.rejected(CallStatus.BAD_ARGUMENTS, why), None

        if ep.zooms_done >= self.config.max_zooms:
            return bad(f"all {self.config.max_zooms} zooms are used; give your final answer")
        args = call.arguments or {}
        raw = args.get("bbox", args.get("bbox_2d"))
        if not isinstance(raw, list) or len(raw) != 4:
            return bad('"bbox" must be a list of 4 numbers [x0, y0, x1, y1]')
        if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in raw):
            return bad('"bbox" must hold 4 finite numbers')
        x0, y0, x1, y1 = (float(v) for v in raw)
        if min(x0, y0) < 0 or max(x1, y1) > limit:
            return bad(f"the box {clip(str(raw))} reaches outside the image (0 to {limit})")
        if x1 <= x0 or y1 <= y0:
            return bad("the box is inverted or empty: x1 must exceed x0 and y1 must exceed y0")
        vx0, vy0, vx1, vy1 = self._to_view((x0, y0, x1, y1))
        if min(vx1 - vx0, vy1 - vy0) < MIN_ZOOM_PX:
            return bad(f"the box is under {MIN_ZOOM_PX} px of the first image on a side; make it larger")
        return call, (x0, y0, x1, y1)

    def _to_view(self, box: Box) -> Box:
        factor = self.config.view / self._frame()[0]
        return box[0] * factor, box[1] * factor, box[2] * factor, box[3] * factor

    def _target_plate(self) -> Box:
        s = self.config.scale
        x0, y0, x1, y1 = renderer.plate_box(self._episode().scene.target_object, self.config)
        return x0 / s, y0 / s, x1 / s, y1 / s

    def _example_box(self) -> Box:
        """A fixed box for instructions (never the target's: the example must not give it away)."""
        limit = self._frame()[0]
        return limit / 8, limit / 4, limit * 3 / 8, limit / 2

    def _oracle_box(self) -> Box:
        """The target's box in the configured frame, rounded outwards."""
        s, limit = self.config.scale, self._frame()[0]
        factor = limit / self.config.view
        x0, y0, x1, y1 = (v / s * factor for v in self._episode().scene.target_object.box)
        return math.floor(x0), math.floor(y0), min(limit, math.ceil(x1)), min(limit, math.ceil(y1))

    def _final(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        ep = self._episode()
        ep.done = ep.answered = True
        ep.answer = extract_boxed(response_text)
        truth = ep.scene.target_object.code
        ep.success = ep.answer is not None and _normal(ep.answer) == truth
        given = f"'{clip(ep.answer)}'" if ep.answer is not None else "missing (no \\boxed{} answer)"
        text = f"Final answer {given}: {'correct' if ep.success else 'not correct'}. The episode is over."
        return Observation(text=text), True, self._info(terminated=True, info={"final_answer": ep.answer})

    def _info(self, *, terminated: bool = False, truncated: bool = False, info: dict[str, Any]) -> StepInfo:
        ep = self._episode()
        metrics: dict[str, float | int | bool] = {
            "turn": ep.turn,
            "zoom_calls": ep.zoom_calls,
            "zoom_hit": ep.zoom_hit,
            "invalid_calls": ep.invalid_calls,
        }
        if ep.done:
            metrics.update(success=ep.success, answered=ep.answer is not None)
        info = {**info, "ground_truth": ep.scene.target_object.code}
        reward = self.episode_reward() if ep.done else 0.0
        return StepInfo(reward=reward, terminated=terminated, truncated=truncated, metrics=metrics, info=info)

    def episode_reward(self) -> float:
        """1.0 for the right code (plus ``tool_bonus`` if a zoom was used), else 0.0."""
        ep = self._ep
        if ep is None or not ep.success:
            return 0.0
        return 1.0 + (self.config.tool_bonus if ep.zooms_done else 0.0)

    def _state_text(self, ep: _Episode) -> str:
        """The objects (shape, colour, code, canvas box), which one is asked for, whether a zoom has shown
        it, and the final answer's verdict."""
        objects = "\n".join(f"{o.color} {o.shape} {o.code} at {list(o.box)}" for o in ep.scene.objects)
        answered = "no" if not ep.answered else ("right" if ep.success else "wrong")
        return (
            f"Objects:\n{objects}\nAsked: {ep.scene.question()}\n"
            f"Zoomed in on it: {'yes' if ep.zoom_hit else 'no'}\nAnswered: {answered}"
        )

    def _distance(self, ep: _Episode) -> int:
        """A zoom on the target (its code is unreadable until one shows it; none where the config allows no
        zoom) and the answer; ``UNREACHABLE`` after a wrong final answer."""
        zooms = self.config.max_zooms > 0 and self.config.max_turns > 1
        return answer_distance(ep.success, lost=ep.answered, to_answer=1 if ep.zoom_hit or not zooms else 2)

    def oracle_response(self) -> str | None:
        """The reference player: zooms on the target's box, reads the code, answers."""
        ep = self._unfinished()
        if ep is None:
            return None
        if ep.zooms_done == 0 and self.config.max_zooms > 0 and self.config.max_turns > 1:
            return f"Let me zoom in. {self.zoom_call(self._oracle_box())}"
        return f"The code is \\boxed{{{ep.scene.target_object.code}}}."

    def oracle_rationale(self) -> str | None:
        """Where the target is and why zoom there, or what the zoom showed; None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        if ep.zooms_done == 0 and self.config.max_zooms > 0 and self.config.max_turns > 1:
            return rationale.explain_zoom(ep.scene.target_object, self._oracle_box(), self._frame()[0])
        return rationale.explain_answer(ep.scene.target_object, ep.zoom_hit)

    def random_response(self, rng: random.Random) -> str:
        """Plausible and broken replies drawn from ``rng``: zooms anywhere, guesses, malformed calls."""
        limit = self._frame()[0]
        side = rng.randint(limit // 16, limit // 3)
        x, y = rng.randint(0, limit - side), rng.randint(0, limit - side)
        code = "".join(rng.choice(renderer.glyph_alphabet()) for _ in range(self.config.code_length))
        return rng.choice(
            [
                f"Zooming. {self.zoom_call((x, y, x + side, y + side))}",
                f"Zooming. {self.zoom_call((x, y, x + side, y + side))}",
                f"The code is \\boxed{{{code}}}.",
                format_tool_call(TOOL_NAME, {"bbox": [x + side, y, x, y + side]}),
                format_tool_call(TOOL_NAME, {"bbox": ["a", 1, 2, 3]}),
                format_tool_call("crop", {"bbox": [0, 0, 10, 10]}),
                f"I cannot read it, maybe {code}.",
            ]
        )


def _contains(outer: Box, inner: Box) -> bool:
    return outer[0] <= inner[0] and outer[1] <= inner[1] and outer[2] >= inner[2] and outer[3] >= inner[3]
