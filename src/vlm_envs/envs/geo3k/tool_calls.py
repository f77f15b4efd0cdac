"""Parsing the scoring-tool call out of a model turn (Qwen's ``<tool_call>{json}</tool_call>`` format)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any

#: Qwen chat templates wrap a call as ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>``.
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
#: ``calc_score`` is the name slime's geo3k prompt teaches; verl's geo3k tool is ``calc_geo3k_reward``.
TOOL_NAMES = ("calc_score", "calc_geo3k_reward")
#: Payloads longer than this are refused without parsing.
MAX_PAYLOAD_CHARS = 16_384
#: Answers longer than this are refused (a geo3k answer is a few characters).
MAX_ANSWER_CHARS = 1_000

EXAMPLE_CALL = f'{OPEN_TAG}{{"name": "calc_score", "arguments": {{"answer": "YOUR ANSWER"}}}}{CLOSE_TAG}'
HOW_TO_CALL = f"Call the tool exactly like this: {EXAMPLE_CALL}"


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


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters with control characters escaped, for quoting back."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in cut)


def _load_json(raw: str) -> tuple[Any, str]:
    """``(value, "")`` or ``(None, why it is not JSON)``."""
    try:
        return json.loads(raw), ""
    except RecursionError:
        return None, "it is nested too deeply"
    except ValueError as err:  # JSONDecodeError, and int strings beyond Python's digit limit
        return None, str(err)


def parse_tool_call(text: str) -> ToolCall:
    """The last tool call in ``text``; calls with another tool name or no answer are reported as such."""
    count = text.count(OPEN_TAG)
    if not count:
        return ToolCall(CallStatus.NONE, end=0)
    start = text.rfind(OPEN_TAG) + len(OPEN_TAG)
    close = text.find(CLOSE_TAG, start)
    end = len(text) if close < 0 else close + len(CLOSE_TAG)

    def fail(status: CallStatus, error: str, name: str | None = None) -> ToolCall:
        return ToolCall(status, name=name, error=error, count=count, end=end)

    raw = (text[start:] if close < 0 else text[start:close]).strip()
    if len(raw) > MAX_PAYLOAD_CHARS:
        return fail(CallStatus.MALFORMED, f"the tool call is {len(raw)} characters long; keep it short")
    if not raw:
        return fail(CallStatus.MALFORMED, "the tool call is empty")
    payload, why = _load_json(raw)
    if why:
        missing_close = f" and {CLOSE_TAG} is missing" if close < 0 else ""
        return fail(CallStatus.MALFORMED, f"the tool call is not valid JSON ({clip(why)}){missing_close}")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return fail(CallStatus.MALFORMED, 'the tool call must be a JSON object with a "name" string')
    name = payload["name"].strip()
    if name not in TOOL_NAMES:
        return fail(
            CallStatus.UNKNOWN_TOOL, f"there is no tool named {clip(name)!r}; the tool is calc_score", name
        )
    arguments = payload.get("arguments", payload.get("parameters"))
    if isinstance(arguments, str):
        arguments, why = _load_json(arguments)
        if why:
            return fail(CallStatus.MALFORMED, f'"arguments" is a string that is not JSON ({clip(why)})', name)
    if arguments is None:
        return fail(CallStatus.MISSING_ANSWER, 'the tool call has no "arguments" with an "answer"', name)
    if not isinstance(arguments, dict):
        return fail(CallStatus.MALFORMED, '"arguments" must be a JSON object such as {"answer": "..."}', name)
    answer = arguments.get("answer")
    if isinstance(answer, int | float) and not isinstance(answer, bool):
        answer = repr(answer)
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return fail(CallStatus.MISSING_ANSWER, 'the "answer" argument is missing or empty', name)
    if not isinstance(answer, str):
        return fail(
            CallStatus.MALFORMED, 'the "answer" argument must be a string such as "12" or "3\\\\sqrt{2}"'
        )
    if len(answer) > MAX_ANSWER_CHARS:
        return fail(
            CallStatus.MALFORMED, f"the answer is {len(answer)} characters long; give just the answer"
        )
    return ToolCall(CallStatus.OK, name=name, answer=answer.strip(), count=count, end=end)
