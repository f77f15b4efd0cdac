"""The shared ``<tool_call>`` parser: what counts as a call, and what each failure says."""

import json

import pytest

from vlm_envs.envs.tool_calls import CallStatus, clip, format_tool_call, parse_tool_call

OK, NONE, BAD = CallStatus.OK, CallStatus.NONE, CallStatus.MALFORMED


def call(payload) -> str:
    return f"<tool_call>{payload if isinstance(payload, str) else json.dumps(payload)}</tool_call>"


CASES = [
    ("valid", call({"name": "zoom", "arguments": {"bbox": [1, 2, 3, 4]}}), OK, {"bbox": [1, 2, 3, 4]}),
    ("Qwen's newlines", '<tool_call>\n{"name": "zoom", "arguments": {"a": 1}}\n</tool_call>', OK, {"a": 1}),
    (
        "arguments as a JSON string",
        call({"name": "calc", "arguments": '{"expression": "1+1"}'}),
        OK,
        {"expression": "1+1"},
    ),
    ("parameters key", call({"name": "calc", "parameters": {"expression": "2"}}), OK, {"expression": "2"}),
    ("no arguments", call({"name": "calc"}), OK, None),
    ("unclosed but complete JSON", '<tool_call>{"name": "calc", "arguments": {"x": 5}}', OK, {"x": 5}),
    ("no call", "The answer is \\boxed{12}.", NONE, None),
    ("stray close tag only", "</tool_call> \\boxed{1}", NONE, None),
    ("bare JSON without tags", '{"name": "calc", "arguments": {}}', NONE, None),
    ("malformed JSON", '<tool_call>{"name": "calc", "arguments": {"x": }</tool_call>', BAD, None),
    ("single quotes", "<tool_call>{'name': 'calc', 'arguments': {}}</tool_call>", BAD, None),
    ("empty call", "<tool_call>   </tool_call>", BAD, None),
    ("JSON list", call([1, 2]), BAD, None),
    ("name not a string", call({"name": 7, "arguments": {}}), BAD, None),
    ("arguments a list", call({"name": "calc", "arguments": ["12"]}), BAD, None),
    ("arguments a non-JSON string", call({"name": "calc", "arguments": "x=12"}), BAD, None),
    ("arguments a JSON string of a list", call({"name": "calc", "arguments": "[1]"}), BAD, None),
    ("unclosed and cut off", '<tool_call>{"name": "calc", "arguments": {"ex', BAD, None),
    ("deep nesting", "<tool_call>" + "[" * 10_000 + "]" * 10_000 + "</tool_call>", BAD, None),
    (
        "deep nesting in arguments string",
        call({"name": "c", "arguments": "[" * 5000 + "]" * 5000}),
        BAD,
        None,
    ),
    ("huge payload", call({"name": "calc", "arguments": {"x": "1" * 100_000}}), BAD, None),
    ("too many digits for int()", "<tool_call>" + "9" * 5000 + "</tool_call>", BAD, None),
    ("an int past float range", call({"name": "zoom", "arguments": {"bbox": [10**400, 0, 1, 1]}}), BAD, None),
    ("a negative int past float range", call({"name": "z", "arguments": {"x": -(10**309)}}), BAD, None),
    (
        "a float past float range",
        '<tool_call>{"name": "z", "arguments": {"x": 1e999}}</tool_call>',
        BAD,
        None,
    ),
    ("NaN", '<tool_call>{"name": "z", "arguments": {"x": NaN}}</tool_call>', BAD, None),
    ("-Infinity", '<tool_call>{"name": "z", "arguments": {"x": -Infinity}}</tool_call>', BAD, None),
    (
        "a huge int in a string of arguments",
        call({"name": "z", "arguments": f'{{"x": {10**400}}}'}),
        BAD,
        None,
    ),
    ("the largest float is a number", call({"name": "z", "arguments": {"x": 10**308}}), OK, {"x": 10**308}),
]


@pytest.mark.parametrize(("label", "text", "status", "arguments"), CASES, ids=[c[0] for c in CASES])
def test_tool_call_cases(label, text, status, arguments):
    parsed = parse_tool_call(text)
    assert parsed.status is status, parsed.error
    assert parsed.arguments == arguments
    assert bool(parsed.error) == (status is BAD)
    assert parsed.count == text.count("<tool_call>")


def test_the_last_of_several_calls_counts_and_text_after_it_is_left():
    head = "a " + format_tool_call("calc", {"expression": "1"}) + " b " + format_tool_call("zoom", {"x": 2})
    parsed = parse_tool_call(head + " then \\boxed{4}")
    assert (parsed.status, parsed.name, parsed.arguments, parsed.count) == (OK, "zoom", {"x": 2}, 2)
    assert parsed.end == len(head)


def test_a_broken_last_call_is_not_rescued_by_an_earlier_good_one():
    parsed = parse_tool_call(format_tool_call("calc", {"expression": "1"}) + '<tool_call>{"name": ')
    assert parsed.status is BAD and parsed.count == 2
    assert "not valid JSON" in parsed.error and "</tool_call> is missing" in parsed.error


def test_errors_name_the_problem_and_quote_the_example():
    assert "characters long" in parse_tool_call(call({"name": "x" * 20_000})).error
    error = parse_tool_call(call({"name": "calc", "arguments": [1]}), arguments_example='{"a": 1}').error
    assert error == '"arguments" must be a JSON object such as {"a": 1}'


def test_expecting_refuses_unknown_names_and_keeps_known_ones():
    known = parse_tool_call(format_tool_call("zoom", {}))
    assert known.expecting({"zoom"}) is known
    unknown = parse_tool_call(format_tool_call("__import__('os')", {})).expecting({"zoom"})
    assert (
        unknown.status is CallStatus.UNKNOWN_TOOL
        and "zoom" in unknown.error
        and "__import__" in unknown.error
    )
    broken = parse_tool_call("<tool_call>{")
    assert broken.expecting({"zoom"}) is broken
    refused = known.rejected(CallStatus.BAD_ARGUMENTS, "no bbox")
    assert (refused.status, refused.error, refused.name) == (CallStatus.BAD_ARGUMENTS, "no bbox", "zoom")


def test_clip_escapes_control_characters_and_cuts():
    assert clip("a\x00b\nc") == "a\\x00b\\nc"
    assert clip("x" * 100, 10) == "x" * 10 + "…"


def test_out_of_range_numbers_are_refused_with_a_reason_and_every_accepted_number_is_a_float():
    parsed = parse_tool_call(call({"name": "zoom", "arguments": {"bbox": [int("9" * 400), 1, 2, 3]}}))
    assert parsed.status is BAD and "out of range" in parsed.error and "finite" in parsed.error
    assert "9" * 40 not in parsed.error  # the number is quoted cut short
    parsed = parse_tool_call(call({"name": "zoom", "arguments": {"bbox": [-(10**308), 1.5e308, 0, 1]}}))
    assert parsed.ok and all(abs(float(v)) < float("inf") for v in parsed.arguments["bbox"])
