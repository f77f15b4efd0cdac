"""``ChartCalcEnv``: read values off a chart, compute with the ``calc`` tool, answer exactly.

A reply with a ``<tool_call>`` of ``calc`` gets a ``tool`` observation with the value or the error; a
reply without a tool call is the final answer: its last ``\\boxed{}`` is checked and the episode ends.
The episode is cut (reward 0) after ``max_turns`` replies. Numeric answers are checked by the library's
answer checker (exact at the stated rounding, or within ``tolerance``); category answers after
normalising case and spaces. The reward is binary.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from PIL import Image

from vlm_envs.envs.chart_calc import rationale
from vlm_envs.envs.chart_calc.calc import MAX_EXPRESSION_CHARS, CalcError, evaluate, format_value
from vlm_envs.envs.chart_calc.config import ChartCalcConfig
from vlm_envs.envs.chart_calc.generator import ChartTable, Question, generate_question, generate_table
from vlm_envs.envs.chart_calc.renderer import render_chart
from vlm_envs.envs.episodic import EpisodicEnv
from vlm_envs.envs.tool_calls import CallStatus, ToolCall, clip, format_tool_call, parse_tool_call
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.state_signals import answer_distance
from vlm_envs.verify import MAX_ANSWER_CHARS, extract_boxed, grade

TOOL_NAME = "calc"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Evaluate an arithmetic expression: numbers, + - * / ^, parentheses and the functions sqrt, abs, "
            "round, min, max. Returns the value."
        ),
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (57 - 32) / 32 * 100"}},
            "required": ["expression"],
        },
    },
}
_EXAMPLE = format_tool_call(TOOL_NAME, {"expression": "(57 - 32) / 32 * 100"})


@dataclasses.dataclass
class _Episode:
    table: ChartTable
    question: Question
    image: Image.Image
    #: The value of the question's own expression, as the tool shows it.
    needed: str
    turn: int = 0
    calc_calls: int = 0
    invalid_calls: int = 0
    #: A ``calc`` call has shown :attr:`needed`.
    computed: bool = False
    #: A final answer (a reply without a tool call) ended the episode.
    answered: bool = False
    done: bool = False
    success: bool = False
    answer: str | None = None


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


class ChartCalcEnv(EpisodicEnv[ChartCalcConfig, _Episode]):
    """ChartCalc: a bar, grouped bar, line or pie chart and a question needing arithmetic on its values."""

    description: ClassVar[str] = "Charts with exact value labels, arithmetic questions and a calc tool"

    config_class = ChartCalcConfig

    def tools(self) -> list[dict[str, Any]]:
        return [TOOL_SCHEMA]

    def reset(
        self, seed: int | None = None, options: Mapping[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """A new chart and question from ``seed``; ``options`` override config fields for this episode."""
        self._configure(options)
        seed = self._episode_seed(seed)
        rng = np.random.default_rng([seed, 0xC4A7])
        table = generate_table(self.config, rng)
        question = generate_question(table, self.config, rng)
        image = render_chart(table, self.config.image_size)
        self._ep = _Episode(table, question, image, format_value(evaluate(question.expression)))
        info = {
            "seed": seed,
            "chart": table.kind,
            "question_kind": question.kind,
            "ground_truth": question.answer,
            "expression": question.expression,
        }
        return Observation.compose(image, "\n" + self._instructions()), info

    def _instructions(self) -> str:
        ep = self._episode()
        return (
            f"{ep.question.text}\n\nRead the values from the chart. You may compute with the calc tool; "
            f"to call it, write: {_EXAMPLE}\nYou have {self.config.max_turns} replies in all. When you are "
            "done, reply without a tool call and put your final answer in \\boxed{}."
        )

    def step(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        """Answer a ``calc`` call with its value, or check the final answer (see the module docstring)."""
        ep = self._playing()
        ep.turn += 1
        call = parse_tool_call(response_text, arguments_example='{"expression": "2 * (3 + 4)"}')
        if call.status is CallStatus.NONE:
            return self._final(response_text)
        call = call.expecting({TOOL_NAME})
        text, call = self._calc(call)
        ep.calc_calls += 1
        ep.invalid_calls += not call.ok
        truncated = ep.turn >= self.config.max_turns
        ep.done = truncated
        if truncated:
            text += " The reply limit is reached: the episode is over with no final answer."
        elif ep.turn == self.config.max_turns - 1:
            text += (
                " You have one reply left: reply without a tool call and give your final answer in \\boxed{}."
            )
        info = {"tool_call": {"status": call.status.value, "name": call.name}, "tool_call_error": call.error}
        return Observation(text=text, role="tool"), ep.done, self._info(truncated=truncated, info=info)

    def _calc(self, call: ToolCall) -> tuple[str, ToolCall]:
        if not call.ok:
            return f"calc error: {call.error}. Call it like this: {_EXAMPLE}", call
        expression = (call.arguments or {}).get("expression")
        if isinstance(expression, int | float) and not isinstance(expression, bool):
            expression = repr(expression)
        if not isinstance(expression, str):
            call = call.rejected(CallStatus.BAD_ARGUMENTS, 'the "expression" argument must be a string')
            return f"calc error: {call.error}. Call it like this: {_EXAMPLE}", call
        try:
            value = evaluate(expression)
        except CalcError as err:
            call = call.rejected(CallStatus.BAD_ARGUMENTS, str(err))
            shown = clip(expression, min(80, MAX_EXPRESSION_CHARS))
            return f"calc error in '{shown}': {err}.", call
        shown = format_value(value)
        ep = self._episode()
        ep.computed |= shown == ep.needed
        return f"calc result: {clip(expression)} = {shown}", call

    def _final(self, response_text: str) -> tuple[Observation, bool, StepInfo]:
        ep = self._episode()
        ep.done = ep.answered = True
        ep.answer = extract_boxed(response_text)
        too_long = ep.answer is not None and len(ep.answer) > MAX_ANSWER_CHARS
        ep.success = ep.answer is not None and not too_long and self._correct(ep.answer)
        given = f"'{clip(ep.answer)}'" if ep.answer is not None else "missing (no \\boxed{} answer)"
        if too_long:
            given = f"is over {MAX_ANSWER_CHARS} characters long, too long to check"
        verdict = "correct" if ep.success else "not correct"
        text = f"Final answer {given}: {verdict}. The episode is over."
        return Observation(text=text), True, self._info(terminated=True, info={"final_answer": ep.answer})

    def _correct(self, answer: str) -> bool:
        truth = self._episode().question
        if not truth.numeric:
            return _normal(answer) == _normal(truth.answer)
        if answer.strip() == truth.answer:
            return True
        verdict = grade(answer, truth.answer, timeout=self.config.grade_timeout)
        if verdict.correct or self.config.tolerance is None:
            return verdict.correct
        try:
            return abs(float(verdict.prediction_parsed or "") - float(truth.answer)) <= self.config.tolerance
        except ValueError:
            return False

    def _info(self, *, terminated: bool = False, truncated: bool = False, info: dict[str, Any]) -> StepInfo:
        ep = self._episode()
        metrics: dict[str, float | int | bool] = {
            "turn": ep.turn,
            "calc_calls": ep.calc_calls,
            "invalid_calls": ep.invalid_calls,
        }
        if ep.done:
            metrics.update(success=ep.success, answered=ep.answer is not None)
        info = {**info, "ground_truth": ep.question.answer}
        reward = self.episode_reward() if ep.done else 0.0
        return StepInfo(reward=reward, terminated=terminated, truncated=truncated, metrics=metrics, info=info)

    def _state_text(self, ep: _Episode) -> str:
        """The chart's table, the question and its answer, whether ``calc`` has shown the value the question
        needs, and the final answer's verdict."""
        table = ep.table
        rows = "\n".join(
            f"{name or 'values'}: {', '.join(map(str, values))}"
            for name, values in zip(table.series, table.values, strict=True)
        )
        answered = "no" if not ep.answered else ("right" if ep.success else "wrong")
        return (
            f"Chart: {table.kind}, {table.title} ({table.unit})\nCategories: {', '.join(table.categories)}\n"
            f"{rows}\nQuestion: {ep.question.text}\nAnswer: {ep.question.answer}\n"
            f"Computed: {'yes' if ep.computed else 'no'}\nAnswered: {answered}"
        )

    def _distance(self, ep: _Episode) -> int:
        """The reference player's turns: ``calc`` on the question's values (where a reply is left for the
        answer), then the answer; ``UNREACHABLE`` after a wrong final answer."""
        to_answer = 1 if ep.computed or self.config.max_turns == 1 else 2
        return answer_distance(ep.success, lost=ep.answered, to_answer=to_answer)

    def oracle_response(self) -> str | None:
        """The reference player: computes with ``calc`` first (when a reply is left for the answer),
        then answers exactly."""
        ep = self._unfinished()
        if ep is None:
            return None
        if ep.calc_calls == 0 and self.config.max_turns > 1:
            return f"Let me compute. {format_tool_call(TOOL_NAME, {'expression': ep.question.expression})}"
        return f"The answer is \\boxed{{{ep.question.answer}}}."

    def oracle_rationale(self) -> str | None:
        """The chart values the question needs and the arithmetic on them; None when done."""
        ep = self._unfinished()
        if ep is None:
            return None
        return rationale.explain(ep.table, ep.question, ep.calc_calls == 0 and self.config.max_turns > 1)

    def random_response(self, rng: random.Random) -> str:
        """Plausible and broken replies drawn from ``rng``: calls, guesses, malformed calls."""
        ep = self._episode()
        values = [v for row in ep.table.values for v in row]
        a, b = rng.choice(values), rng.choice(values)
        guess = rng.choice([str(a - b), f"{a / b:.2f}", str(a + b), rng.choice(ep.table.categories)])
        expression = f"{a} {rng.choice('+-*/')} {b}"
        return rng.choice(
            [
                f"Compute. {format_tool_call(TOOL_NAME, {'expression': expression})}",
                f"The answer is \\boxed{{{guess}}}.",
                format_tool_call(TOOL_NAME, {"expression": "9^9^9^9"}),
                format_tool_call("python", {"code": "__import__('os')"}),
                '<tool_call>{"name": "calc", "arguments": {"expression": </tool_call>',
                f"I think it is {guess}.",
            ]
        )
