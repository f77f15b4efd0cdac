"""Resuming an aborted episode at its last finished turn (slime's ``--partial-rollout``).

When a trainer aborts an episode (its flag before a turn, or the engine's abort inside one), the episode
loop writes down what a later call needs to go on (:func:`resume_state`): the env's snapshot after the
last finished turn, each finished turn's token counts and record, the conversation as the loop holds it
(image parts without their images), how many tokens of the cut turn the engine returned, and a digest of
the tokens it goes with. It is plain JSON, bounded like a snapshot and sealed with a digest of itself.

The tokens, log probs, loss mask and images stay where the trainer keeps them (slime's Sample). A
:class:`ResumeRequest` carries them back with the state, and :func:`rebuild` checks both and makes the
trajectory as it stood at the abort, without a request to the engine; the loop then continues the cut
turn from its partial tokens. A loss mask the trainer zeroed over the kept response (slime's
``--mask-offpolicy-in-partial-rollout``) is accepted: the trainer keeps it as it is.
"""

from __future__ import annotations

import array
import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from vlm_envs.rewards import check_reward
from vlm_envs.rollout.chat_messages import is_image_part
from vlm_envs.rollout.codec import ChatCodec, Encoded, ProcessedImage
from vlm_envs.rollout.history import History
from vlm_envs.rollout.segment import Segment
from vlm_envs.rollout.trajectory import STANDING_FIELDS, Kept, Trajectory, TurnRecord
from vlm_envs.snapshot import canonical_json, check_plain, digest_of
from vlm_envs.state_signals import UNREACHABLE

#: The key that marks a resume state, and the version of its layout.
FORMAT_KEY = "vlm_envs_resume"
FORMAT = 2  # 2: each turn says where it stood (state_key, distance_to_goal, next_distance_to_goal)
_KEYS = frozenset(
    {
        FORMAT_KEY,
        "snapshot",
        "prompt_source",
        "reset_info",
        "prompt_messages",
        "turns",
        "cut",
        "tokens",
        "digest",
    }
)
_TURN_KEYS = frozenset(
    {"generated", "observation_tokens", "finish_reason", "reward", "done", "metrics", "timings", "message"}
    | set(STANDING_FIELDS)
)
#: How a finished turn's generation may have ended (an aborted one is the cut turn).
_FINISHED = frozenset({"stop", "length"})


class ResumeError(ValueError):
    """A resume state that cannot be read, or does not belong to the tokens it came back with."""


@dataclasses.dataclass(frozen=True)
class ResumeRequest:
    """An aborted episode handed back: its resume state and what the trainer kept of it."""

    #: :func:`resume_state`'s dict, as the trainer kept it (checked by :func:`rebuild`).
    state: Any
    #: Prompt + response ids, images expanded.
    tokens: tuple[int, ...]
    response_length: int
    loss_mask: tuple[int, ...]
    log_probs: tuple[float, ...]
    #: Every image so far (resized as the episode sent them), in token order.
    images: tuple[Image.Image, ...]


@dataclasses.dataclass(frozen=True)
class Rebuilt:
    """An aborted episode made again: the trajectory at the abort, the engine's form of its ids
    (one pad per image), and the env's snapshot after the last finished turn."""

    traj: Trajectory
    engine_ids: tuple[int, ...]
    snapshot: dict[str, Any]


def tokens_digest(ids: Sequence[int]) -> str:
    """``sha256:<hex>`` of token ids (what ties a resume state to the trainer's tokens)."""
    try:
        data = array.array("q", ids).tobytes()
    except (TypeError, OverflowError) as err:
        raise ResumeError(f"the sample's tokens are not token ids: {err}") from None
    return "sha256:" + hashlib.sha256(data).hexdigest()


def resume_state(traj: Trajectory, snapshot: dict[str, Any]) -> dict[str, Any]:
    """What an ABORTED full-history ``traj`` resumes from, with ``snapshot`` (the env's, taken after its
    last finished turn): plain JSON, sealed. ``ValueError`` where something in it is not plain JSON."""
    turns = traj.turns
    cut = turns[-1] if turns and turns[-1].finish_reason == "abort" else None
    finished = turns[: len(turns) - (cut is not None)]
    n_prompt = len(traj.messages) - 2 * len(finished) - (cut is not None)
    counted = sum(t.generated_tokens + t.observation_tokens for t in finished) + (
        cut.generated_tokens if cut else 0
    )
    if n_prompt < 1 or counted != traj.response_length:
        raise ValueError("the trajectory's messages and segments do not follow its turns")
    observations = traj.messages[n_prompt + 1 : n_prompt + 2 * len(finished) : 2]
    content = {
        FORMAT_KEY: FORMAT,
        "snapshot": snapshot,
        "prompt_source": traj.prompt_source,
        "reset_info": _finite(traj.reset_info),
        "prompt_messages": [_plain_message(m) for m in traj.messages[:n_prompt]],
        "turns": [
            {
                "generated": t.generated_tokens,
                "observation_tokens": t.observation_tokens,
                "finish_reason": t.finish_reason,
                "reward": t.reward,
                "done": t.done,
                "metrics": _finite(t.metrics),
                "timings": _finite(t.timings),
                "message": _plain_message(message),
                **{field: getattr(t, field) for field in STANDING_FIELDS},
            }
            for t, message in zip(finished, observations, strict=True)
        ],
        "cut": None if cut is None else cut.generated_tokens,
        "tokens": tokens_digest(traj.tokens),
    }
    content = json.loads(canonical_json(content))  # as a trainer keeps it; raises where it is not JSON
    check_plain(content, "the resume state")
    return {**content, "digest": digest_of(content)}


def rebuild(request: ResumeRequest, codec: ChatCodec) -> Rebuilt:
    """The trajectory ``request``'s episode had at its abort (kept turns, the cut turn's partial reply,
    images, conversation), checked against the state; :class:`ResumeError` for anything that does not
    agree (a state altered or foreign, tokens changed, a mask that is not the episode's or zeros)."""
    state = _open(request.state)
    tokens = tuple(request.tokens)
    if tokens_digest(tokens) != state["tokens"]:
        raise ResumeError("the sample's tokens are not the ones its resume state was taken with")
    n = request.response_length
    if type(n) is not int or not 0 <= n <= len(tokens):
        raise ResumeError(f"response_length {n!r:.40} does not fit the sample's {len(tokens)} tokens")
    if not len(request.loss_mask) == len(request.log_probs) == n:
        lengths = f"loss_mask {len(request.loss_mask)}, log probs {len(request.log_probs)}, response {n}"
        raise ResumeError(f"{lengths}: lengths differ")
    prompt_ids, response = tokens[: len(tokens) - n], tokens[len(tokens) - n :]
    turns = [_turn(entry, i) for i, entry in enumerate(state["turns"])]
    cut = state["cut"]
    if cut is not None and (type(cut) is not int or cut < 0):
        raise ResumeError(f"the cut turn's token count {cut!r:.40} is not an int >= 0")
    if sum(e["generated"] + e["observation_tokens"] for e in turns) + (cut or 0) != n:
        raise ResumeError(f"the resume state's turns do not add up to the sample's {n} response tokens")

    images = [_processed(codec, image) for image in request.images]
    prompt_engine, k = _engine_ids(prompt_ids, images, 0, codec.image_token_id)
    response_engine, used = _engine_ids(response, images, k, codec.image_token_id)
    if used != len(images):
        raise ResumeError(f"{len(images)} images for {used} image blocks in the sample's tokens")

    messages = [dict(m) for m in state["prompt_messages"]]
    records: list[TurnRecord] = []
    kept = _KeptResponse(codec, request, response)
    for i, entry in enumerate(turns):
        reply = kept.reply(entry["generated"])
        text, content_ids = _text(codec, reply.ids)
        messages += [{"role": "assistant", "content": text, "token_ids": content_ids}, dict(entry["message"])]
        o = entry["observation_tokens"]
        kept.observation(o)
        record = TurnRecord(
            i,
            text,
            entry["finish_reason"],
            len(reply.ids),
            reward=entry["reward"],
            done=entry["done"],
            metrics=dict(entry["metrics"]),
            observation_tokens=o,
            timings=dict(entry["timings"]),
            reply=reply,
            **{field: entry[field] for field in STANDING_FIELDS},
        )
        records.append(record)
    if cut is not None:  # the cut turn: its partial reply, which the loop continues
        reply = kept.reply(cut)
        text, content_ids = _text(codec, reply.ids)
        messages.append({"role": "assistant", "content": text, "token_ids": content_ids})
        records.append(TurnRecord(len(turns), text, "abort", cut, reply=reply))
    traj = Trajectory(
        prompt=Encoded(ids=prompt_ids, engine_ids=prompt_engine, images=images[:k], text=""),
        messages=messages,
        segments=kept.segments,
        images=images,
        turns=records,
        reset_info=dict(state["reset_info"]),
        prompt_source=state["prompt_source"],
        history=History(),
    )
    generated = sum(e["generated"] for e in turns) + (cut or 0)
    traj.kept = Kept(turns=len(turns), response_tokens=n, generated_tokens=generated)
    return Rebuilt(traj, prompt_engine + response_engine, state["snapshot"])


class _KeptResponse:
    """Walks the trainer's kept response, turn by turn, checking its mask and log probs."""

    def __init__(self, codec: ChatCodec, request: ResumeRequest, response: tuple[int, ...]) -> None:
        self.codec, self.response, self.at = codec, response, 0
        self.mask, self.log_probs = request.loss_mask, request.log_probs
        self.segments: list[Segment] = []

    def reply(self, n: int) -> Segment:
        """The next ``n`` tokens as a generated reply: mask 1 (or a trainer's 0), a finite log prob <= 0."""
        at, self.at = self.at, self.at + n
        ids, log_probs = self.response[at : self.at], self.log_probs[at : self.at]
        for t, m, lp in zip(ids, self.mask[at : self.at], log_probs, strict=True):
            if m not in (0, 1) or type(lp) not in (float, int) or not (math.isfinite(lp) and lp <= 0.0):
                raise ResumeError(f"a kept generated token has mask {m!r:.20} and log prob {lp!r:.20}")
            if t in self.codec.special_image_ids:
                raise ResumeError("a kept generated token is an image special token")
        segment = Segment(ids, tuple(float(lp) for lp in log_probs), trainable=True)
        self._add(segment)
        return segment

    def observation(self, n: int) -> None:
        """The next ``n`` tokens as an observation: mask 0, log prob 0.0."""
        at, self.at = self.at, self.at + n
        if any(m != 0 for m in self.mask[at : self.at]) or any(
            lp != 0.0 for lp in self.log_probs[at : self.at]
        ):
            raise ResumeError("a kept observation token has a mask or a log prob that is not 0")
        self._add(Segment(self.response[at : self.at], None, trainable=False))

    def _add(self, segment: Segment) -> None:
        if segment.ids:
            self.segments.append(segment)


def _text(codec: ChatCodec, ids: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """A reply's text and content ids (without its end-of-turn token), as the episode loop makes them."""
    content_ids = ids[:-1] if ids and ids[-1] == codec.end_of_turn_id else ids
    return codec.decode(content_ids), content_ids


def _processed(codec: ChatCodec, image: Any) -> ProcessedImage:
    if not isinstance(image, Image.Image):
        raise ResumeError(f"a kept image is a {type(image).__name__}, not a PIL image")
    return codec.process_image(image)


def _engine_ids(
    ids: tuple[int, ...], images: list[ProcessedImage], first: int, pad: int | None
) -> tuple[tuple[int, ...], int]:
    """``ids`` with each image's pad run (images from ``first`` on, in order) as one pad, and the index
    after the last image used; :class:`ResumeError` unless every run has its image's length."""
    out: list[int] = []
    i, k = 0, first
    while i < len(ids):
        if ids[i] != pad:
            out.append(ids[i])
            i += 1
            continue
        if k >= len(images):
            raise ResumeError(f"the sample's tokens hold more image blocks than its {len(images)} images")
        end = i + images[k].num_tokens
        if ids[i:end] != (pad,) * images[k].num_tokens or (end < len(ids) and ids[end] == pad):
            raise ResumeError(f"image {k}'s pad run does not have its {images[k].num_tokens} tokens")
        out.append(pad)
        i, k = end, k + 1
    return tuple(out), k


def _is_message(message: Any) -> bool:
    return type(message) is dict and type(message.get("role")) is str


def _plain_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` with its image parts as ``{"type": "image"}`` (the images stay with the trainer)."""
    content = message.get("content")
    if isinstance(content, list):
        content = [{"type": "image"} if is_image_part(p) else p for p in content]
    return {**message, "content": content}


def _finite(values: Mapping[str, Any]) -> dict[str, Any]:
    """The plain entries of a record mapping: strings, bools, ints and finite floats."""
    return {
        k: v
        for k, v in values.items()
        if isinstance(v, str | bool | int) or (isinstance(v, float) and math.isfinite(v))
    }


def _open(state: Any) -> dict[str, Any]:
    """``state`` if it is a whole, unaltered resume state of this layout."""
    if type(state) is not dict:
        raise ResumeError(f"a resume state is a dict, got {type(state).__name__}")
    check_plain(state, "the resume state")  # SnapshotError (a ValueError) past the bounds
    if state.keys() != _KEYS:
        raise ResumeError(f"not a vlm-envs resume state: keys {sorted(state)[:12]}")
    if state[FORMAT_KEY] != FORMAT:
        raise ResumeError(
            f"resume state format {state[FORMAT_KEY]!r:.20}; this vlm-envs reads format {FORMAT}"
        )
    if state["digest"] != digest_of({k: v for k, v in state.items() if k != "digest"}):
        raise ResumeError("the resume state was altered or truncated: its digest does not match its content")
    if type(state["snapshot"]) is not dict or type(state["turns"]) is not list:
        raise ResumeError("the resume state's snapshot must be an object and its turns a list")
    if state["prompt_source"] not in ("env", "sample") or type(state["reset_info"]) is not dict:
        raise ResumeError("the resume state's prompt source or reset info is malformed")
    messages = state["prompt_messages"]
    if type(messages) is not list or not messages or not all(_is_message(m) for m in messages):
        raise ResumeError("the resume state's prompt messages are malformed")
    return state


def _turn(entry: Any, index: int) -> dict[str, Any]:
    """A finished turn's entry, every field checked."""
    if type(entry) is not dict or entry.keys() != _TURN_KEYS:
        raise ResumeError(f"turn {index} of the resume state is malformed")
    counts = (entry["generated"], entry["observation_tokens"])
    if any(type(c) is not int or c < 0 for c in counts) or entry["finish_reason"] not in _FINISHED:
        raise ResumeError(f"turn {index} of the resume state has bad token counts or finish reason")
    if (
        type(entry["done"]) is not bool
        or type(entry["metrics"]) is not dict
        or type(entry["timings"]) is not dict
    ):
        raise ResumeError(f"turn {index} of the resume state has a malformed record")
    key, distances = entry["state_key"], (entry["distance_to_goal"], entry["next_distance_to_goal"])
    if (key is not None and type(key) is not str) or any(
        d is not None and (type(d) is not int or d < UNREACHABLE) for d in distances
    ):
        raise ResumeError(f"turn {index} of the resume state has a malformed state key or distance")
    if not _is_message(entry["message"]):
        raise ResumeError(f"turn {index} of the resume state has a malformed observation message")
    try:
        check_reward(entry["reward"], f"turn {index}'s step reward")
    except ValueError as err:
        raise ResumeError(str(err)) from None
    return entry


def segments_after(segments: Sequence[Segment], n: int) -> list[Segment]:
    """The response ``segments`` after their first ``n`` tokens (a segment across the cut loses its head):
    what a trainer appends to a resumed sample that holds the first ``n`` already."""
    out = []
    for segment in segments:
        if n >= len(segment.ids):
            n -= len(segment.ids)
            continue
        if n:
            log_probs = None if segment.log_probs is None else segment.log_probs[n:]
            segment, n = Segment(segment.ids[n:], log_probs, segment.trainable), 0
        out.append(segment)
    return out
