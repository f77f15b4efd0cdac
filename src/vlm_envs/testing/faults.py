"""Faults the SGLang test server can play instead of a good answer: one per way a server misbehaves.

A :class:`Fault` is queued on the server and replaces the answer to one request. Some answer
without generating (``status``, ``body``, ``abort``, ``drop``, ``delay`` then a normal answer);
the others generate normally and then break the reply (:func:`corrupt_reply`) or the way it is sent
(:func:`stream_reply`), so a client sees exactly one broken rule per fault.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections import deque
from typing import Any, Literal

from aiohttp import web

FaultKind = Literal[
    # answers without a generation
    "status",
    "delay",
    "abort",
    "body",
    "tokens",
    "drop",
    # a generated reply with one value broken
    "out_of_vocab",
    "negative_id",
    "float_id",
    "bool_id",
    "positive_logprob",
    "huge_logprob",
    "too_many_tokens",
    "mismatched_lengths",
    "unknown_finish",
    # a generated reply sent the wrong way
    "huge_body",
    "drip",
    "stall",
]

CORRUPTIONS = frozenset(
    {
        "out_of_vocab",
        "negative_id",
        "float_id",
        "bool_id",
        "positive_logprob",
        "huge_logprob",
        "too_many_tokens",
        "mismatched_lengths",
        "unknown_finish",
    }
)
STREAMED = frozenset({"huge_body", "drip", "stall"})


@dataclasses.dataclass(frozen=True)
class Fault:
    """What the server does with one request instead of answering it normally.

    Without generating: ``status``: answer HTTP ``status`` with an error body. ``delay``: wait
    ``seconds``, then answer normally. ``abort``: answer ``finish_reason {"type": "abort"}`` with no
    tokens; with a ``size``, as SGLang answers a request aborted mid-generation: the first ``size``
    tokens generated (or of ``token_ids``, scored by the model) with their log probs. ``body``: answer
    HTTP ``status`` (200 unless set) with ``body`` verbatim (e.g. malformed JSON). ``tokens``: answer
    with ``token_ids`` as the generation, scored by the model (after ``seconds``). ``drop``: close the
    connection unanswered.

    A generated reply with its last token broken: ``out_of_vocab`` (id ``token_ids[0]``, default
    vocabulary size + 5), ``negative_id`` (-1), ``float_id`` (id + 0.7), ``bool_id`` (``true``),
    ``positive_logprob`` (5.0), ``huge_logprob`` (1e308), ``mismatched_lengths`` (a log prob with no
    id); ``too_many_tokens``: ``size`` tokens (default 5007) whatever ``max_new_tokens`` said;
    ``unknown_finish``: finish reason ``"done"``.

    A generated reply sent the wrong way: ``huge_body``: ``size`` bytes (default 50 MB) of valid
    JSON, chunked, with no Content-Length; ``drip``: one byte every ``seconds`` (default 1);
    ``stall``: headers and half the body, then nothing for ``seconds`` (default 30).
    """

    kind: FaultKind
    status: int = 500
    seconds: float = 0.0
    body: str = ""
    token_ids: tuple[int, ...] = ()
    size: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        """A fault from its JSON form (the fields of this class)."""
        data = dict(data)
        data["token_ids"] = tuple(data.get("token_ids", ()))
        return cls(**data)


class FaultQueue:
    """Faults for the next requests, in order; thread-safe (tests inject from another thread)."""

    def __init__(self) -> None:
        self._items: deque[Fault] = deque()
        self._lock = threading.Lock()

    def push(self, fault: Fault, times: int) -> None:
        with self._lock:
            self._items.extend([fault] * times)

    def pop(self) -> Fault | None:
        with self._lock:
            return self._items.popleft() if self._items else None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def corrupt_reply(reply: dict[str, Any], fault: Fault, vocab_size: int) -> dict[str, Any]:
    """``reply`` (a good ``/generate`` answer with log probs) with the value ``fault`` names broken."""
    meta = reply["meta_info"]
    triples = meta["output_token_logprobs"] or [[-1.0, 0, None]]
    log_prob, token, _ = triples[-1]
    broken: dict[str, list[Any]] = {
        "out_of_vocab": [log_prob, fault.token_ids[0] if fault.token_ids else vocab_size + 5, None],
        "negative_id": [log_prob, -1, None],
        "float_id": [log_prob, token + 0.7, None],
        "bool_id": [log_prob, True, None],
        "positive_logprob": [5.0, token, None],
        "huge_logprob": [1e308, token, None],
        "mismatched_lengths": [log_prob],
    }
    if fault.kind in broken:
        triples = [*triples[:-1], broken[fault.kind]]
    elif fault.kind == "too_many_tokens":
        size = fault.size or 5007
        triples = [triples[i % len(triples)] for i in range(size)]
    elif fault.kind == "unknown_finish":
        meta = {**meta, "finish_reason": {"type": "done"}}
    else:
        raise ValueError(f"{fault.kind!r} is not a reply corruption")
    return {
        **reply,
        "meta_info": {**meta, "output_token_logprobs": triples, "completion_tokens": len(triples)},
    }


async def stream_reply(request: web.Request, reply: dict[str, Any], fault: Fault) -> web.StreamResponse:
    """Send ``reply`` the way ``fault`` names; stops quietly once the client has gone."""
    body = json.dumps(reply).encode()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    if fault.kind != "huge_body":
        response.content_length = len(body)
    try:
        await response.prepare(request)
        if fault.kind == "huge_body":
            await _write_huge(response, body, fault.size or 50 << 20)
        elif fault.kind == "drip":
            for i in range(len(body)):
                await response.write(body[i : i + 1])
                await asyncio.sleep(fault.seconds or 1.0)
        elif fault.kind == "stall":
            await response.write(body[: len(body) // 2])
            await _hold(request, fault.seconds or 30.0)
            await response.write(body[len(body) // 2 :])
        else:
            raise ValueError(f"{fault.kind!r} is not a streamed fault")
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client hung up (aiohttp raises either)
        pass
    return response


async def _hold(request: web.Request, seconds: float) -> None:
    """Wait ``seconds``, or until the client hangs up."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end and request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(0.05)


async def _write_huge(response: web.StreamResponse, body: bytes, size: int) -> None:
    """``size`` bytes of valid JSON: the reply with a long padding field in front."""
    head, tail = b'{"padding": "', b'", ' + body[1:]
    chunk = b"x" * (1 << 20)
    await response.write(head)
    left = max(0, size - len(head) - len(tail))
    while left > 0:
        await response.write(chunk[:left])
        left -= len(chunk)
    await response.write(tail)
