"""The ``calc`` evaluator: arithmetic right, every hostile input refused quickly with a reason; and the
ChartCalc steps that grade or calculate hostile replies bounded well under a second (issue #33)."""

import threading
import time

import pytest

from vlm_envs import build_env
from vlm_envs.envs.chart_calc.calc import MAX_EXPRESSION_CHARS, CalcError, evaluate, format_value
from vlm_envs.envs.tool_calls import format_tool_call
from vlm_envs.verify import MAX_ANSWER_CHARS, bounded, shutdown

VALUES = [
    ("57 - 32", 25),
    ("(57 - 32) / 32 * 100", 78.125),
    ("2 ^ 3 ^ 2", 512),
    ("2 ** 10", 1024),
    ("-2 ^ 2", -4),
    ("2 ^ -1", 0.5),
    ("--3", 3),
    ("1.5e2 + .5", 150.5),
    ("sqrt(16) + abs(-3)", 7),
    ("round(2.71828, 2)", 2.72),
    ("max(3, 9, 4) - min(3, 9, 4)", 6),
    ("((((1 + 2))))", 3),
    ("  12 ", 12),
]


@pytest.mark.parametrize(("expression", "value"), VALUES)
def test_values(expression, value):
    assert evaluate(expression) == pytest.approx(value)


HOSTILE = [
    ("9^9^9^9", "exponent"),
    ("9 ** 9 ** 9 ** 9", "exponent"),
    ("10 ^ 400", "larger"),
    ("1e308 * 10", "larger"),
    ("1" * 10_000, "characters long"),
    ("1 + " * 150 + "1", "characters long"),
    ("1+" * 120 + "1", "tokens"),
    ("(" * 40 + "1" + ")" * 40, "nested"),
    ("-" * 60 + "1", "nested"),
    ("__import__('os').system('echo pwned')", "unexpected character"),
    ("__import__(1)", "unknown name"),
    ("x + 1", "unknown name"),
    ("pi", "unknown name"),
    ("1/0", "division by zero"),
    ("0 ^ -1", "division by zero"),
    ("(-8) ^ 0.5", "not a real number"),
    ("sqrt(-1)", "negative"),
    ("round(1, 99)", "digits"),
    ("min()", "expected"),
    ("max(" + ",".join(["1"] * 21) + ")", "arguments"),
    ("1 +", "ends"),
    ("(1 + 2", "expected ')'"),
    ("1 2", "after a complete expression"),
    ("2 $ 3", "unexpected character"),
    ("1" * 40 + " + 1", "number is"),
    ("", "empty"),
    ("   ", "empty"),
    ("\u202e1+1", "unexpected character"),
    ("１+１", "unexpected character"),
    ("((1+1+" * 80 + "1" + "))" * 80, "characters long"),
    ("((1+1+" * 40, "tokens"),
    ("((1+" * 20 + "1" + "))" * 20, "nested"),
]


@pytest.mark.parametrize(("expression", "why"), HOSTILE, ids=[h[0][:30] for h in HOSTILE])
def test_hostile_expressions_are_refused_with_a_reason_within_a_second(expression, why):
    box = {}

    def run():
        try:
            box["value"] = evaluate(expression)
        except CalcError as err:
            box["error"] = str(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(1.0)
    assert not thread.is_alive(), "evaluate() did not answer within a second"
    assert "value" not in box
    assert why in box["error"]


def test_the_length_cap_is_what_the_errors_say():
    assert evaluate(" " * (MAX_EXPRESSION_CHARS - 1) + "7") == 7
    with pytest.raises(CalcError, match=str(MAX_EXPRESSION_CHARS)):
        evaluate("1" * (MAX_EXPRESSION_CHARS + 1))


def test_non_strings_are_refused():
    with pytest.raises(CalcError, match="string"):
        evaluate(12)  # type: ignore[arg-type]


def test_format_value():
    assert [format_value(v) for v in (25.0, -4.0, 78.125, 1 / 3, 1e20)] == [
        "25",
        "-4",
        "78.125",
        "0.333333333333",
        "1e+20",
    ]


def _timed_step(env, reply: str) -> tuple[float, str, float]:
    start = time.monotonic()
    obs, done, info = env.step(reply)
    assert done
    return time.monotonic() - start, obs.text, info.reward


@pytest.mark.parametrize("answer", ["NaN", "inf", "-nan", "((1+1+" * 60, "52 or 53", "B", "12.5 cm", "3,700"])
def test_a_final_answer_needing_no_parser_is_graded_without_the_grading_pool(answer):
    """Issue #33: ``\\boxed{NaN}`` took 3.4 s, the start of the grading processes; such answers (and
    plain numbers) are now graded in the caller, so the pool is never started for them."""
    shutdown()
    env = build_env("chart_calc")
    env.reset(seed=0)
    elapsed, text, reward = _timed_step(env, f"So the answer is \\boxed{{{answer}}}.")
    assert reward == 0.0 and "not correct" in text
    assert bounded._pool is None  # no worker was started or waited for
    assert elapsed < 1.0


def test_a_correct_plain_number_is_graded_without_the_grading_pool():
    shutdown()
    env = build_env("chart_calc", questions=["difference", "sum"])
    _, info = env.reset(seed=3)
    truth = info["ground_truth"]
    padded = truth + "0" if "." in truth else truth + ".0"  # not the label's own text: it is graded
    elapsed, text, reward = _timed_step(env, f"\\boxed{{{padded}}}")
    assert reward == 1.0 and ": correct" in text
    assert bounded._pool is None and elapsed < 1.0


@pytest.mark.parametrize("body", ["9", "{"], ids=["digits", "braces"])
def test_a_32_mb_boxed_reply_is_refused_as_too_long_within_a_second(body):
    """Issue #33: a 32 MB ``\\boxed{}`` reply took 4.7-10.6 s a step (all of it read in Python)."""
    env = build_env("chart_calc")
    env.reset(seed=0)
    elapsed, text, reward = _timed_step(env, "\\boxed{" + body * 32_000_000 + "}")
    assert reward == 0.0
    assert f"over {MAX_ANSWER_CHARS} characters long" in text and len(text) < 200
    assert elapsed < 1.0


def test_calc_steps_with_long_nestings_answer_within_a_second():
    """Issue #33: a ``calc`` of a long ``((1+1+...`` nesting was reported at 2.0 s a step."""
    env = build_env("chart_calc", max_turns=8)
    env.reset(seed=0)
    for expression in ("((1+1+" * n + "1" + "))" * n for n in (5, 15, 16, 40, 83, 3000)):
        start = time.monotonic()
        obs, done, _ = env.step(format_tool_call("calc", {"expression": expression}))
        assert time.monotonic() - start < 1.0
        assert obs.role == "tool" and not done
        env.reset(seed=0)
