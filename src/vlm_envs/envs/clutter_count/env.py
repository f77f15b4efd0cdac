"""``ClutterCountEnv``: count the shapes of one colour and kind in a cluttered picture, with a ``mark`` tool.

The first observation is the picture and the question. A reply with a ``<tool_call>`` of ``mark`` gets a
``tool`` observation holding the picture with every mark so far drawn as a numbered dot, and how many marks
there are; it never says what a mark fell on (that would count for the model). A bad call gets a ``tool``
observation saying what was wrong, with no image. A reply without a tool call is the final answer: a whole
number in its last ``\\boxed{}`` (else its ``<answer>`` block). The reward is 1.0 for the right count (plus
``tool_bonus`` after an accepted ``mark`` call) or 0.0; the episode is cut (reward 0) after ``max_turns``
replies.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from vlm_envs.envs.answers import answer_block
from vlm_envs.envs.clutter_count import marking, rationale
from vlm_envs.envs.clutter_count.config import ClutterCountConfig
from vlm_envs.envs.clutter_count.generator import Scene, generate_scene
from vlm_envs.envs.clutter_count.marking import TOOL_NAME, Frame
from vlm_envs.envs.clutter_count.renderer import draw_marks, draw_picture
from vlm_envs.envs.clutter_count.shapes import PLURALS
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.tool_calls import CallStatus, clip, format_tool_call, parse_tool_call
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance
from vlm_envs.verify import extract_boxed

#: A final answer: a whole number of ASCII digits (a trailing full stop allowed).
_WHOLE = re.compile(r"[0-9]{1,6}\.?", re.ASCII)


@dataclasses.dataclass
class _Episode:
    scene: Scene
    picture: Image.Image
    turn: int = 0
    mark_calls: int = 0
    calls_done: int = 0
    invalid_calls: int = 0
    #: Every mark placed, as a picture pixel (x, y), in order.
    marks: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    #: A final answer (a reply without a tool call) ended the episode.
    answered: bool = False
    done: bool = False
    success: bool = False
    answer: str | None = None

    def marked_targets(self) -> int:
        """How many targets carry at least one mark."""
        owners = {int(self.scene.owner[y, x]) for x, y in self.marks}
        return len(owners.intersection(self.scene.targets))

    @property
    def covered(self) -> bool:
        """Every target carries a mark."""
        return self.marked_targets() == self.scene.count


def read_count(text: str) -> str | None:
    """The answer of a final reply: its last ``\\boxed{}``, else its ``<answer>`` block; ``None``: neither."""
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    block = answer_block(text)
    return None if block.error else block.content


class ClutterCountEnv(EpisodicEnv[ClutterCountConfig, _Episode]):
    """ClutterCount: a picture of many overlapping shapes; how many of one colour and kind are there?"""

    description: ClassVar[str] = "Count one colour and kind of shape in a cluttered picture, with a mark tool"

    config_class = ClutterCountConfig

    def _frame(self) -> Frame:
        return Frame(self.config.image_size, self.config.coords)

    def tools(self) -> list[dict[str, Any]]:
        return [marking.schema(self._frame())]

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new picture and question from ``seed``; ``options`` override config fields for this episode."""
        self._configure(options)
        seed = self._episode_seed(seed)
        scene = generate_scene(self.config, np.random.default_rng([seed, 0xC0417]))
        self._ep = _Episode(scene, draw_picture(scene))
        info = {
            "seed": seed,
            "question": scene.asked(),
            "ground_truth": str(scene.count),
            "objects": len(scene.pieces),
            "partly_hidden": scene.partly_hidden(),
        }
        return Observation.compose(self._ep.picture, "\n" + self._instructions()), info

    def _instructions(self) -> str:
        cfg, scene = self.config, self._episode().scene
        question = (
            f"How many {scene.asked()} are in the picture? Count only {scene.asked()}: {scene.color} shapes "
            f"of other kinds and {PLURALS[scene.kind]} of other colours do not count. Some shapes are partly "
            "hidden behind others."
        )
        if cfg.max_mark_calls == 0:
            tool = ""
        else:
            frame = self._frame()
            tool = (
                "\nTo keep track, you may place marks with the mark tool, giving points [[x, y], ...] in "
                f"{frame.words()}, for example: {marking.call(marking.example_points(frame))}\nIt answers "
                "with the picture and every mark so far drawn as a numbered dot, and how many marks there "
                f"are (not what they are on). You may call it {cfg.max_mark_calls} times, {cfg.max_marks} "
                "marks in all."
            )
        return (
            f"{question}{tool}\nYou have {cfg.max_turns} replies in all. When you are done, reply without a "
            "tool call and put the number in \\boxed{}."
        )

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer a ``mark`` call with the marked picture, or check the final answer (module docstring)."""
        ep = self._playing()
        ep.turn += 1
        call = parse_tool_call(response_text, arguments_example=marking.ARGUMENTS_EXAMPLE)
        if call.status is CallStatus.NONE:
            return self._final(response_text)
        ep.mark_calls += 1
        cfg = self.config
        call = call.expecting({TOOL_NAME})
        if call.ok and ep.calls_done >= cfg.max_mark_calls:
            call = call.rejected(
                CallStatus.BAD_ARGUMENTS,
                f"all {cfg.max_mark_calls} mark calls are used; give your final answer",
            )
        call, points = marking.read_points(call, self._frame(), cfg.max_marks - len(ep.marks))
        pieces: list[str | Image.Image]
        if points is None:
            ep.invalid_calls += 1
            example = marking.call(marking.example_points(self._frame()))
            pieces = [f"mark error: {call.error}. Example: {example}"]
        else:
            ep.calls_done += 1
            ep.marks.extend(points)
            total = len(ep.marks)
            pieces = [
                f"mark: {len(points)} new, {total} in all, numbered 1 to {total} "
                f"({ep.calls_done} of {cfg.max_mark_calls} mark calls used):\n",
                draw_marks(ep.picture, ep.marks),
            ]
        truncated = ep.turn >= cfg.max_turns
        ep.done = truncated
        if truncated:
            pieces.append("\nThe reply limit is reached: the episode is over with no final answer.")
        elif ep.turn == cfg.max_turns - 1:
            pieces.append(
                "\nYou have one reply left: reply without a tool call and give the number in \\boxed{}."
            )
        info = {"tool_call": {"status": call.status.value, "name": call.name}, "tool_call_error": call.error}
        obs = Observation.compose(*pieces, role="tool")
        return obs, ep.done, self._info(truncated=truncated, info=info)

    def _final(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        ep = self._episode()
        ep.done = ep.answered = True
        ep.answer = read_count(response_text)
        number = ep.answer.strip() if ep.answer is not None else ""
        whole = _WHOLE.fullmatch(number) is not None
        ep.success = whole and int(number.rstrip(".")) == ep.scene.count
        if ep.answer is None:
            given = "missing (no \\boxed{} answer)"
        else:
            given = f"'{clip(number)}'" + ("" if whole else " (not a whole number)")
        text = f"Final answer {given}: {'correct' if ep.success else 'not correct'}. The episode is over."
        return Observation(text=text), True, self._info(terminated=True, info={"final_answer": ep.answer})

    def _info(self, *, terminated: bool = False, truncated: bool = False, info: dict[str, Any]) -> StepInfo:
        ep = self._episode()
        metrics: dict[str, float | int | bool] = {
            "turn": ep.turn,
            "mark_calls": ep.mark_calls,
            "marks": len(ep.marks),
            "targets_marked": ep.marked_targets(),
            "invalid_calls": ep.invalid_calls,
        }
        if ep.done:
            metrics.update(success=ep.success, answered=ep.answer is not None)
        info = {**info, "ground_truth": str(ep.scene.count)}
        reward = self.episode_reward() if ep.done else 0.0
        return StepInfo(reward=reward, terminated=terminated, truncated=truncated, metrics=metrics, info=info)

    def episode_reward(self) -> float:
        """1.0 for the right count (plus ``tool_bonus`` after an accepted ``mark`` call), else 0.0."""
        ep = self._ep
        if ep is None or not ep.success:
            return 0.0
        return 1.0 + (self.config.tool_bonus if ep.calls_done else 0.0)

    def _state_text(self, ep: _Episode) -> str:
        """Every object in draw order (kind, colour, centre, radius, turn, visible pixels), the question and
        its count, the marks placed (each with the object it is on), whether every target carries one, and
        the final answer's verdict."""
        scene = ep.scene
        objects = "\n".join(
            f"{i}. {p.color} {p.kind} at ({p.x}, {p.y}), radius {p.radius}, turned {p.angle} degrees, "
            f"{scene.visible[i]} of {scene.area[i]} px visible"
            for i, p in enumerate(scene.pieces)
        )
        marks = "; ".join(f"({x}, {y}) on {_on(scene, x, y)}" for x, y in ep.marks) or "none"
        answered = "no" if not ep.answered else ("right" if ep.success else "wrong")
        return (
            f"Picture: {self.config.image_size} px; objects in draw order, later on top:\n{objects}\n"
            f"Asked: {scene.asked()}\nCount: {scene.count} (objects {', '.join(map(str, scene.targets))})\n"
            f"Marks: {marks}\nEvery target marked: {'yes' if ep.covered else 'no'}\nAnswered: {answered}"
        )

    def _marking(self, ep: _Episode) -> bool:
        """Whether the reference player still has to mark: the config allows a mark call and a reply after
        it, and some target carries no mark."""
        return self.config.max_mark_calls > 0 and self.config.max_turns > 1 and not ep.covered

    def _distance(self, ep: _Episode) -> int:
        """The reference player's turns: one ``mark`` call on every unmarked target (where the config allows
        one and a reply after it), then the answer; ``UNREACHABLE`` after a wrong final answer."""
        return answer_distance(ep.success, lost=ep.answered, to_answer=2 if self._marking(ep) else 1)

    def _oracle_marks(self, ep: _Episode) -> list[tuple[int, int]] | None:
        """The centres of the targets without a mark, when the reference player marks now (a call, enough
        marks and a reply for the answer after it are left), else ``None``."""
        cfg = self.config
        if not self._marking(ep) or ep.calls_done >= cfg.max_mark_calls or ep.turn + 2 > cfg.max_turns:
            return None
        owners = {int(ep.scene.owner[y, x]) for x, y in ep.marks}
        centres = [
            (p.x, p.y) for i, p in enumerate(ep.scene.pieces) if i in ep.scene.targets and i not in owners
        ]
        return centres if len(centres) <= cfg.max_marks - len(ep.marks) else None

    def oracle_response(self) -> str | None:
        """The reference player: marks the centre of every target (each is visible: no object covers a
        centre), then answers the count."""
        ep = self._unfinished()
        if ep is None:
            return None
        centres = self._oracle_marks(ep)
        if centres is not None:
            points = [self._frame().from_pixel(x, y) for x, y in centres]
            which = f"{ep.scene.color} {ep.scene.kind}{' without a mark yet' if ep.marks else ''}"
            return f"I mark each {which} at its centre. {marking.call(points)}"
        return f"There are \\boxed{{{ep.scene.count}}} {ep.scene.asked()}."

    def oracle_rationale(self) -> str | None:
        """What counts, how many there are and how many are partly hidden; why mark or answer now."""
        ep = self._unfinished()
        if ep is None:
            return None
        centres = self._oracle_marks(ep)
        if centres is not None:
            return rationale.explain_marks(ep.scene, again=bool(ep.marks))
        return rationale.explain_answer(ep.scene, ep.covered)

    def random_response(self, rng: random.Random) -> str:
        """Plausible and broken replies drawn from ``rng``: marks anywhere, guesses, malformed calls."""
        limit = self._frame().limit
        points = [[rng.randint(0, limit), rng.randint(0, limit)] for _ in range(rng.randint(1, 6))]
        guess = rng.randint(1, self.config.targets[1])
        return rng.choice(
            [
                f"Marking. {marking.call(points)}",
                f"Marking. {marking.call(points)}",
                f"There are \\boxed{{{guess}}}.",
                f"<answer>{guess}</answer>",
                format_tool_call(TOOL_NAME, {"points": [[limit + 5, 0]]}),
                format_tool_call(TOOL_NAME, {"points": [[1, 2, 3]]}),
                format_tool_call("count", {"color": "red"}),
                f"I count about {guess}.",
            ]
        )


def _on(scene: Scene, x: int, y: int) -> str:
    owner = int(scene.owner[y, x])
    return "none" if owner < 0 else f"{owner}"
