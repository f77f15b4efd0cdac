"""Demonstrations: whole episodes as the conversation the RL rollout would hold.

A :class:`Demonstration` is what one episode said: the env's system prompt, its first observation,
then each reply and the observation that answered it, in the chat messages ``run_episode`` builds
(``Env.format_observation`` for observations, the reply text for the assistant). As in the rollout,
the observation after the last reply is not part of it. Two sources: the env's oracle
(:func:`play_oracle`) and the replies of a ``vlm-envs eval`` run, replayed through the env
(:func:`replay_record`), so both give the env's own observations and images, not copies of them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from vlm_envs.protocol import DEFAULT_MAX_TURNS, Env, Observation, StepInfo

#: A chat-template control token written as text (``<|im_end|>``, ``<|im_start|>``, ``<|image_pad|>``):
#: the special tokens of Qwen's (and Llama 3's) templates all have this shape, and a tokenizer turns
#: such text into the control ids themselves, so a reply holding one would forge structure in training.
SPECIAL_TOKEN = re.compile(r"<\|[A-Za-z0-9_]+\|>")


class DemonstrationError(ValueError):
    """An episode cannot become a demonstration (no oracle, or a replay that does not match its record)."""


@dataclasses.dataclass(frozen=True)
class Demonstration:
    """One episode's conversation: chat messages in rollout order, image parts holding PIL images."""

    env: str
    seed: int
    messages: tuple[dict[str, Any], ...]
    reward: float
    success: bool
    status: str  # "completed" (the env ended it) or "truncated" (the turn cap did)

    @property
    def replies(self) -> int:
        """How many assistant turns the conversation holds."""
        return sum(m["role"] == "assistant" for m in self.messages)

    def special_tokens(self) -> list[str]:
        """The control tokens written as text in any message (a served model's reply, or an env
        quoting one), in order."""
        found = []
        for message in self.messages:
            content = message["content"]
            texts = [content] if isinstance(content, str) else [p.get("text") or "" for p in content]
            for text in texts:
                found += SPECIAL_TOKEN.findall(str(text))
        return found


def oracle_reply(env: Env, rationale: bool) -> str:
    """The oracle's reply to the env's current observation, its rationale first where asked and given."""
    answer = env.oracle_response()
    if answer is None:
        raise DemonstrationError(f"{type(env).__name__} has no oracle reply here (oracle_response() is None)")
    if not rationale:
        return answer
    reason = env.oracle_rationale()
    return answer if reason is None else env.think(reason) + answer


def play_oracle(
    env: Env, name: str, seed: int, max_turns: int | None = None, rationale: bool = False
) -> Demonstration:
    """Episode ``seed`` of ``env`` played by its oracle (``rationale``: each reply explained first)."""
    return _play(env, name, seed, max_turns, lambda _turn: oracle_reply(env, rationale))


def replay_record(env: Env, name: str, record: Mapping[str, Any], max_turns: int | None) -> Demonstration:
    """An eval run's episode (one ``results.jsonl`` record) replayed through ``env``.

    Each recorded reply is stepped again; every observation must equal the recorded one (text and
    role), so a changed env or config cannot pair replies with observations they never answered.
    """
    turns = record.get("turns")
    if not isinstance(turns, list) or not turns:
        raise DemonstrationError("the record holds no turns")
    replies = [t.get("model_text") for t in turns[1:]]
    if not all(isinstance(r, str) for r in replies):
        raise DemonstrationError("a recorded turn holds no model_text")

    def recorded(turn: int, obs: Observation) -> None:
        want = (turns[turn].get("observation") or {}) if turn < len(turns) else {}
        if want and (want.get("text"), want.get("role")) != (obs.text, obs.role):
            raise DemonstrationError(
                f"turn {turn}: the env's observation differs from the recorded one "
                "(another env version or config than the run's?)"
            )

    return _play(env, name, int(record["seed"]), max_turns or len(replies), replies.__getitem__, recorded)


def _play(
    env: Env,
    name: str,
    seed: int,
    max_turns: int | None,
    reply_at: Any,
    observed: Any = None,
) -> Demonstration:
    """The loop of :func:`run_episode` without a model: reset, then reply and step until the end."""
    cap = max_turns or DEFAULT_MAX_TURNS
    obs, _ = env.reset(seed=seed)
    if observed is not None:
        observed(0, obs)
    system = env.system_prompt()
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append(_message(env, obs))
    step, done, status = StepInfo(), False, "truncated"
    for turn in range(cap):
        text = reply_at(turn)
        messages.append({"role": "assistant", "content": text})
        obs, done, step = env.step(text)
        if observed is not None:
            observed(turn + 1, obs)
        if done:
            status = "completed"
            break
        if turn + 1 < cap:
            messages.append(_message(env, obs))
    reward = float(env.episode_reward())
    metrics = step.metrics
    success = bool(metrics["success"]) if "success" in metrics else reward > 0
    return Demonstration(name, seed, tuple(messages), reward, success, status)


def _message(env: Env, obs: Observation) -> dict[str, Any]:
    """``env.format_observation(obs)`` as a plain dict with a list of parts (a string is one text part)."""
    message = env.format_observation(obs)
    content = message["content"]
    parts: Sequence[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return {"role": message["role"], "content": [dict(p) for p in parts]}
