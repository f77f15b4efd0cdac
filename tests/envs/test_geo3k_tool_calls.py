"""Parsing ``<tool_call>`` JSON out of a model turn: what counts, and what each failure says."""

import json

import pytest

from vlm_envs.envs.geo3k.tool_calls import MAX_ANSWER_CHARS, CallStatus, clip, parse_tool_call

OK, NONE, BAD = CallStatus.OK, CallStatus.NONE, CallStatus.MALFORMED
UNKNOWN, MISSING = CallStatus.UNKNOWN_TOOL, CallStatus.MISSING_ANSWER


def call(payload) -> str:
    return f"<tool_call>{payload if isinstance(payload, str) else json.dumps(payload)}</tool_call>"


CASES = [
    ("valid", call({"name": "calc_score", "arguments": {"answer": "12"}}), OK, "12"),
    (
        "Qwen's newlines",
        '<tool_call>\n{"name": "calc_score", "arguments": {"answer": "3"}}\n</tool_call>',
        OK,
        "3",
    ),
    ("verl's tool name", call({"name": "calc_geo3k_reward", "arguments": {"answer": "7.5"}}), OK, "7.5"),
    (
        "arguments as a JSON string",
        call({"name": "calc_score", "arguments": '{"answer": "2\\\\sqrt{3}"}'}),
        OK,
        "2\\sqrt{3}",
    ),
    ("number answer", call({"name": "calc_score", "arguments": {"answer": 42}}), OK, "42"),
    ("float answer", call({"name": "calc_score", "arguments": {"answer": 8.5}}), OK, "8.5"),
    ("answer padded", call({"name": "calc_score", "arguments": {"answer": "  9 "}}), OK, "9"),
    (
        "latex answer",
        call({"name": "calc_score", "arguments": {"answer": "\\frac{25\\pi}{2}"}}),
        OK,
        "\\frac{25\\pi}{2}",
    ),
    ("no call", "The answer is \\boxed{12}.", NONE, None),
    ("stray close tag only", "</tool_call> \\boxed{1}", NONE, None),
    ("bare JSON without tags", '{"name": "calc_score", "arguments": {"answer": "1"}}', NONE, None),
    ("malformed JSON", '<tool_call>{"name": "calc_score", "arguments": {"answer": }</tool_call>', BAD, None),
    (
        "single quotes",
        "<tool_call>{'name': 'calc_score', 'arguments': {'answer': '1'}}</tool_call>",
        BAD,
        None,
    ),
    ("empty call", "<tool_call>   </tool_call>", BAD, None),
    ("JSON list", call([1, 2]), BAD, None),
    ("name not a string", call({"name": 7, "arguments": {"answer": "1"}}), BAD, None),
    ("arguments a list", call({"name": "calc_score", "arguments": ["12"]}), BAD, None),
    ("arguments a non-JSON string", call({"name": "calc_score", "arguments": "answer=12"}), BAD, None),
    ("answer a list", call({"name": "calc_score", "arguments": {"answer": ["1", "2"]}}), BAD, None),
    ("answer a boolean", call({"name": "calc_score", "arguments": {"answer": True}}), BAD, None),
    ("unknown tool", call({"name": "calculator", "arguments": {"answer": "1"}}), UNKNOWN, None),
    ("tool name case", call({"name": "Calc_Score", "arguments": {"answer": "1"}}), UNKNOWN, None),
    ("no arguments", call({"name": "calc_score"}), MISSING, None),
    ("empty arguments", call({"name": "calc_score", "arguments": {}}), MISSING, None),
    ("empty answer", call({"name": "calc_score", "arguments": {"answer": "  "}}), MISSING, None),
    ("null answer", call({"name": "calc_score", "arguments": {"answer": None}}), MISSING, None),
    (
        "unclosed but complete JSON",
        '<tool_call>{"name": "calc_score", "arguments": {"answer": "5"}}',
        OK,
        "5",
    ),
    ("unclosed and cut off", '<tool_call>{"name": "calc_score", "arguments": {"ans', BAD, None),
    ("deep nesting", "<tool_call>" + "[" * 10_000 + "]" * 10_000 + "</tool_call>", BAD, None),
    ("huge payload", call({"name": "calc_score", "arguments": {"answer": "1" * 100_000}}), BAD, None),
    ("too many digits for int()", "<tool_call>" + "9" * 5000 + "</tool_call>", BAD, None),
    (
        "long answer",
        call({"name": "calc_score", "arguments": {"answer": "1" * (MAX_ANSWER_CHARS + 1)}}),
        BAD,
        None,
    ),
]


@pytest.mark.parametrize(("label", "text", "status", "answer"), CASES, ids=[c[0] for c in CASES])
def test_tool_call_cases(label, text, status, answer):
    parsed = parse_tool_call(text)
    assert parsed.status is status, parsed.error
    assert parsed.answer == answer
    assert bool(parsed.error) == (status not in (OK, NONE))


def test_the_last_of_several_calls_counts():
    text = (
        call({"name": "calc_score", "arguments": {"answer": "1"}})
        + " hmm "
        + call({"name": "calc_score", "arguments": {"answer": "2"}})
    )
    parsed = parse_tool_call(text)
    assert (parsed.status, parsed.answer, parsed.count) == (OK, "2", 2)


def test_a_broken_last_call_is_not_rescued_by_an_earlier_good_one():
    text = call({"name": "calc_score", "arguments": {"answer": "1"}}) + '<tool_call>{"name": '
    parsed = parse_tool_call(text)
    assert parsed.status is BAD and parsed.count == 2
    assert "not valid JSON" in parsed.error and "</tool_call> is missing" in parsed.error


def test_text_after_the_call_is_left_for_the_caller():
    head = "Checking. " + call({"name": "calc_score", "arguments": {"answer": "4"}})
    parsed = parse_tool_call(head + " So the answer is \\boxed{4}.")
    assert parsed.status is OK and parsed.answer == "4"
    assert parsed.end == len(head)


def test_errors_name_the_problem():
    assert "calculator" in parse_tool_call(call({"name": "calculator", "arguments": {}})).error
    assert '"answer"' in parse_tool_call(call({"name": "calc_score", "arguments": {}})).error
    assert "characters long" in parse_tool_call(call({"name": "x" * 20_000})).error


def test_clip_escapes_control_characters_and_cuts():
    assert clip("a\x00b\nc") == "a\\x00b\\nc"
    assert clip("x" * 100, 10) == "x" * 10 + "…"
