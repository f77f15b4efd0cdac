"""Everything the Geo3k env says to the model, and the tool schema it advertises."""

from __future__ import annotations

from typing import Any

from vlm_envs.envs.geo3k.tool_calls import EXAMPLE_CALL, HOW_TO_CALL, TOOL_NAMES, ToolCall, clip

#: The tool in OpenAI function format (what chat templates and OpenAI-compatible servers take as ``tools``).
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAMES[0],
        "description": (
            "Check a candidate final answer to the geometry problem against the reference answer. "
            "Returns whether it matches."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "answer": {
                    "type": "string",
                    "description": "The answer only, e.g. 12, 8.5, 2\\sqrt{3}, \\frac{5}{2} or 16\\pi.",
                }
            },
            "required": ["answer"],
        },
    },
}

LAST_ANSWER = (
    "You have one reply left, and it is your final answer: reply without a tool call and put your "
    "final answer in \\boxed{}."
)


def instructions(max_turns: int) -> str:
    """How to use the tool and how to answer, for the first observation."""
    if max_turns == 1:
        return "Think step by step. " + LAST_ANSWER
    return (
        "Think step by step. You may check a candidate answer with the calc_score tool before you commit "
        f"to it; to call it, write exactly: {EXAMPLE_CALL}\n"
        f"You have {max_turns} replies in all. When you are done, reply without a tool call and put your "
        "final answer in \\boxed{}."
    )


def already_instructed(problem_text: str) -> bool:
    """Whether a prompt already teaches the tool protocol (slime's processed geo3k rows do)."""
    return any(name in problem_text for name in TOOL_NAMES) or "<tool_call>" in problem_text


def tool_feedback(call: ToolCall, correct: bool | None) -> str:
    """The tool's answer to a call: the score of a well-formed call, or what was wrong and how to call."""
    if correct is None:
        return f"Tool call error: {call.error}. {HOW_TO_CALL}"
    quoted = clip(call.answer or "")
    if correct:
        return (
            f"calc_score result: 1.0. The answer '{quoted}' matches the reference. "
            "Now reply without a tool call and give your final answer in \\boxed{}."
        )
    return (
        f"calc_score result: 0.0. The answer '{quoted}' does not match the reference. "
        "Work through the problem again; do not repeat this answer."
    )


def episode_over(final_answer: str | None, *, truncated: bool) -> str:
    """The closing observation (the model does not see it in training, but logs and players do)."""
    why = "The reply limit is reached" if truncated else "No tool call in this reply"
    given = f"the final answer is '{clip(final_answer)}'" if final_answer else "no final answer was given"
    return f"{why}: the episode is over and {given}."
