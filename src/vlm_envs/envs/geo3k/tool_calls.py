"""The scoring-tool call of a Geo3k turn: the shared ``<tool_call>`` parser plus Geo3k's name and answer
checks."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from vlm_envs.envs import tool_calls as shared
from vlm_envs.envs.tool_calls import CLOSE_TAG, OPEN_TAG, clip

#: ``calc_score`` is the name slime's geo3k prompt teaches; verl's geo3k tool is ``calc_geo3k_reward``.
TOOL_NAMES = ("calc_score", "calc_geo3k_reward")
#: Payloads longer than this are refused without parsing.
MAX_PAYLOAD_CHARS = shared.MAX_PAYLOAD_CHARS
#: Answers longer than this are refused (a geo3k answer is a few characters).
MAX_ANSWER_CHARS = 1_000

EXAMPLE_CALL = f'{OPEN_TAG}{{"name": "calc_score", "arguments": {{"answer": "YOUR ANSWER"}}}}{CLOSE_TAG}'
HOW_TO_CALL = f"Call the tool exactly like this: {EXAMPLE_CALL}"

__all__ = ["CLOSE_TAG", "OPEN_TAG", "CallStatus", "ToolCall", "clip", "parse_tool_call"]


class CallStatus(str, enum.Enum):
    """What the last tool call of a turn amounted to."""

    NONE = "none"
    OK = "ok"
    MALFORMED = "malformed"
    UNKNOWN_TOOL = "unknown_tool"
    MISSING_ANSWER = "missing_answer"


@dataclass(frozen=True)
class ToolCall:
    """The last ``<tool_call>`` of a turn: its status, tool name, answer, and what was wrong.

    ``count`` is how many ``<tool_call>`` tags the turn opened; ``end`` is the offset just past the
    counted call, so text after it (a later ``\\boxed{}``) can be told apart.
    """

    status: CallStatus
    name: str | None = None
    answer: str | None = None
    error: str = ""
    count: int = 0
    end: int = 0


def parse_tool_call(text: str) -> ToolCall:
    """The last tool call in ``text``; calls with another tool name or no answer are reported as such."""
    call = shared.parse_tool_call(text, arguments_example='{"answer": "..."}')

    def fail(status: CallStatus, error: str) -> ToolCall:
        return ToolCall(status, name=call.name, error=error, count=call.count, end=call.end)

    if call.status is shared.CallStatus.NONE:
        return ToolCall(CallStatus.NONE)
    if not call.ok:  # the shared parser refuses only malformed calls
        return fail(CallStatus.MALFORMED, call.error)
    name = call.name or ""
    if name not in TOOL_NAMES:
        return fail(CallStatus.UNKNOWN_TOOL, f"there is no tool named {clip(name)!r}; the tool is calc_score")
    if call.arguments is None:
        return fail(CallStatus.MISSING_ANSWER, 'the tool call has no "arguments" with an "answer"')
    answer = call.arguments.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = repr(answer)
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return fail(CallStatus.MISSING_ANSWER, 'the "answer" argument is missing or empty')
    if not isinstance(answer, str):
        return fail(
            CallStatus.MALFORMED, 'the "answer" argument must be a string such as "12" or "3\\\\sqrt{2}"'
        )
    if len(answer) > MAX_ANSWER_CHARS:
        return fail(
            CallStatus.MALFORMED, f"the answer is {len(answer)} characters long; give just the answer"
        )
    return ToolCall(CallStatus.OK, name=name, answer=answer.strip(), count=call.count, end=call.end)
