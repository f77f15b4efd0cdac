"""Tool calls in Qwen's text form, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, for every
tool-using env.

:func:`parse_tool_call` reads the last call of a model turn into a :class:`ToolCall` with a status and an
error that says what was wrong; it never raises on model text, and its work is bounded (payload size cap,
JSON depth and digit limits caught). Every number in an accepted call is finite and within float range, so
an env may convert any of them to a float. Which tool names exist and what their arguments must be stay
with each env: :meth:`ToolCall.rejected` turns a parsed call into a refused one with the env's own reason.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from collections.abc import Collection, Mapping
from typing import Any

#: Qwen chat templates wrap a call as ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>``.
OPEN_TAG, CLOSE_TAG = "<tool_call>", "</tool_call>"
#: Payloads longer than this are refused without parsing.
MAX_PAYLOAD_CHARS = 16_384
#: The largest magnitude a number in a call may have: any number an env reads converts to a float.
MAX_NUMBER = sys.float_info.max


class CallStatus(str, enum.Enum):
    """What the last tool call of a turn amounted to."""

    NONE = "none"
    OK = "ok"
    MALFORMED = "malformed"
    UNKNOWN_TOOL = "unknown_tool"
    BAD_ARGUMENTS = "bad_arguments"


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """The last ``<tool_call>`` of a turn: its status, tool name, arguments, and what was wrong.

    ``arguments`` is the decoded JSON object (``None`` when the call gave none); ``count`` is how many
    ``<tool_call>`` tags the turn opened; ``end`` is the offset just past the counted call, so text
    after it (a later ``\\boxed{}``) can be told apart.
    """

    status: CallStatus
    name: str | None = None
    arguments: Mapping[str, Any] | None = None
    error: str = ""
    count: int = 0
    end: int = 0

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.OK

    def rejected(self, status: CallStatus, error: str) -> ToolCall:
        """This call refused for an env's own reason (unknown tool, bad arguments)."""
        return dataclasses.replace(self, status=status, error=error)

    def expecting(self, names: Collection[str]) -> ToolCall:
        """This call, or an ``UNKNOWN_TOOL`` refusal when an OK call names none of ``names``."""
        if not self.ok or self.name in names:
            return self
        listed = " or ".join(sorted(names))
        return self.rejected(
            CallStatus.UNKNOWN_TOOL, f"there is no tool named {clip(self.name or '')!r}; the tool is {listed}"
        )


def clip(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters with control characters escaped, for quoting back."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in cut)


def box_tool(name: str, description: str) -> dict[str, Any]:
    """The function-calling spec of a tool that takes one box, ``{"bbox": [x0, y0, x1, y1]}`` (the zoom
    tools')."""
    bbox = {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}
    parameters = {"type": "object", "properties": {"bbox": bbox}, "required": ["bbox"]}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def format_tool_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The text of a well-formed call (for oracles, scripted policies and instructions)."""
    return f"{OPEN_TAG}{json.dumps({'name': name, 'arguments': dict(arguments)})}{CLOSE_TAG}"


_RANGE = "numbers must be finite, within ±1e308"


def _in_range(value: float, text: str) -> Any:
    if abs(value) > MAX_NUMBER:
        raise ValueError(f"{clip(text, 12)} is out of range ({_RANGE})")
    return value


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a JSON number ({_RANGE})")


def load_json(raw: str) -> tuple[Any, str]:
    """``(value, "")`` or ``(None, why it is not JSON)``; never raises on deep nesting or huge ints.

    Every number in the value converts to a finite float: ``NaN``, ``Infinity`` and numbers beyond
    :data:`MAX_NUMBER` (``1e999``, a 400-digit integer) are refused as errors.
    """
    try:
        value = json.loads(
            raw,
            parse_int=lambda t: _in_range(int(t), t),  # past Python's digit limit int() raises itself
            parse_float=lambda t: _in_range(float(t), t),
            parse_constant=_no_constant,
        )
        return value, ""
    except RecursionError:
        return None, "it is nested too deeply"
    except ValueError as err:  # JSONDecodeError, and int strings beyond Python's digit limit
        return None, str(err)


def parse_tool_call(
    text: str, *, max_payload_chars: int = MAX_PAYLOAD_CHARS, arguments_example: str = ""
) -> ToolCall:
    """The last tool call in ``text``: ``NONE`` without a ``<tool_call>`` tag, ``MALFORMED`` when it is
    not a JSON object with a ``"name"`` string and object ``"arguments"`` (a JSON string holding an
    object is accepted, and ``"parameters"`` as another key for it), else ``OK``.

    ``arguments_example`` (e.g. ``{"answer": "..."}``) is quoted in the error for non-object arguments.
    """
    count = text.count(OPEN_TAG)
    if not count:
        return ToolCall(CallStatus.NONE)
    start = text.rfind(OPEN_TAG) + len(OPEN_TAG)
    close = text.find(CLOSE_TAG, start)
    end = len(text) if close < 0 else close + len(CLOSE_TAG)

    def fail(error: str, name: str | None = None) -> ToolCall:
        return ToolCall(CallStatus.MALFORMED, name=name, error=error, count=count, end=end)

    raw = (text[start:] if close < 0 else text[start:close]).strip()
    if len(raw) > max_payload_chars:
        return fail(f"the tool call is {len(raw)} characters long; keep it short")
    if not raw:
        return fail("the tool call is empty")
    payload, why = load_json(raw)
    if why:
        missing_close = f" and {CLOSE_TAG} is missing" if close < 0 else ""
        return fail(f"the tool call is not valid JSON ({clip(why)}){missing_close}")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return fail('the tool call must be a JSON object with a "name" string')
    name = payload["name"].strip()
    arguments = payload.get("arguments", payload.get("parameters"))
    if isinstance(arguments, str):
        arguments, why = load_json(arguments)
        if why:
            return fail(f'"arguments" is a string that is not JSON ({clip(why)})', name)
    if arguments is not None and not isinstance(arguments, dict):
        such_as = f" such as {arguments_example}" if arguments_example else ""
        return fail(f'"arguments" must be a JSON object{such_as}', name)
    return ToolCall(CallStatus.OK, name=name, arguments=arguments, count=count, end=end)
