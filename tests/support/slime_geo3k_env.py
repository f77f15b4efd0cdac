"""A slime-shaped, Geo3k-like interaction env (the shape of slime's multi-turn examples, not ours).

Duck-typed, no vlm_envs import: ``reset()`` takes no seed and returns ``({}, info)`` (the question
lives in the dataset's prompt), ``step(text)`` returns ``(obs_dict, done, info)``, the module's
``format_observation(obs_dict)`` builds the chat message, there is no episode reward, and
``build_env(sample, args)`` reads ``args.max_turns`` and ``sample.label``.
"""

from __future__ import annotations

import re
from typing import Any

BOXED_RE = re.compile(r"\\boxed\{([^{}]{0,64})\}")
DEFAULT_TURNS = 3


class Geo3kLikeEnv:
    """Answer the geometry question of the prompt in \\boxed{}; each wrong answer gets feedback."""

    def __init__(self, label: str | None, max_turns: int) -> None:
        self.label = None if label is None else str(label).strip()
        self.max_turns = max_turns
        self.turn = 0

    def reset(self):
        self.turn = 0
        return {}, {"has_label": self.label is not None}

    def step(self, response_text: str):
        self.turn += 1
        found = BOXED_RE.findall(response_text[-4096:])
        answer = found[-1].strip() if found else None
        correct = answer is not None and answer == self.label
        done = correct or self.turn >= self.max_turns
        if answer is None:
            text = "No \\boxed{} answer found. Put the final answer in \\boxed{}."
        elif correct:
            text = "Correct."
        else:
            text = f"The answer {answer[:32]!r} is wrong. Try again."
        info = {"correct": correct, "answer_found": answer is not None, "turn": self.turn, "answer": answer}
        return {"obs_str": text, "role": "tool"}, done, info

    def close(self) -> None:
        pass


def build_env(sample: Any = None, args: Any = None, **_: Any) -> Geo3kLikeEnv:
    label = getattr(sample, "label", None) if sample is not None else None
    return Geo3kLikeEnv(label, args.max_turns or DEFAULT_TURNS)


def format_observation(observation: dict) -> dict:
    return {"role": observation.get("role", "tool"), "content": observation.get("obs_str", "")}
