"""Training conversations from a demonstration, with the context the RL rollout sends.

``full`` history: one conversation, every reply trained. ``window:K``: one conversation per reply,
holding exactly what the rollout's model saw at that turn (:meth:`vlm_envs.rollout.trajectory.
Trajectory.context`): the system prompt and the task, the last K replies with the observations that
answered them (``window:0``: the current observation right after the task), then the reply, the only
one trained.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vlm_envs.rollout.history import History
from vlm_envs.sft.demos import Demonstration


@dataclasses.dataclass(frozen=True)
class Conversation:
    """Chat messages and, for each, whether training learns it (assistant replies only)."""

    messages: tuple[dict[str, Any], ...]
    trained: tuple[bool, ...]

    def __post_init__(self) -> None:
        if len(self.messages) != len(self.trained):
            raise ValueError("one trained flag per message")
        if any(t and m["role"] != "assistant" for m, t in zip(self.messages, self.trained, strict=True)):
            raise ValueError("only assistant messages are trained")

    @property
    def last_only(self) -> bool:
        """Whether the final reply is the only trained message (a windowed turn's conversation)."""
        return self.trained.count(True) == 1 and self.trained[-1]


def conversations(demo: Demonstration, history: History | str = "full") -> list[Conversation]:
    """The training conversations of ``demo`` under ``history`` (``"full"`` or ``"window:K"``)."""
    history = History.parse(history)
    messages = demo.messages
    if history.full:
        return [Conversation(messages, tuple(m["role"] == "assistant" for m in messages))]
    head_len = _task_end(messages)
    head = messages[:head_len]
    # after the task: reply 0, observation 1, reply 1, observation 2, ... (the last reply has none)
    replies = messages[head_len::2]
    observations = messages[head_len + 1 :: 2]
    out = []
    for turn, reply in enumerate(replies):
        if history.window == 0:
            context = head if turn == 0 else (*head, observations[turn - 1])
        else:
            context = head + tuple(m for j in history.kept(turn) for m in (replies[j], observations[j]))
        out.append(Conversation((*context, reply), (False,) * len(context) + (True,)))
    return out


def _task_end(messages: tuple[dict[str, Any], ...]) -> int:
    """The index just past the task: the system prompt (if any) and the first observation."""
    end = 2 if messages and messages[0]["role"] == "system" else 1
    roles = [m["role"] for m in messages[end:]]
    if not roles or roles[0::2] != ["assistant"] * len(roles[0::2]) or "assistant" in roles[1::2]:
        raise ValueError("a demonstration alternates replies and observations after its task")
    return end
