"""Inference engines: token ids and images in; token ids, log probs and a finish reason out.

:class:`Engine` is the small interface the episode loop talks to; :class:`SGLangEngine` speaks
SGLang's native ``/generate`` over pooled async HTTP, retrying transient failures only, with a
bounded body and a per-turn deadline. Returned token ids come from
``meta_info.output_token_logprobs``; returned text is never re-tokenized. :class:`ReplyContract`
states what any engine's reply must be; the episode loop checks every reply against it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import numbers
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NoReturn, Protocol, TypeVar, runtime_checkable

import aiohttp

from vlm_envs.http_body import BodyTooLarge, read_capped, redirect_note
from vlm_envs.rollout.image_uris import ImageInput, image_data_uri

# A deadline that cancels the task itself. Not asyncio.wait_for: up to Python 3.11, a wait_for whose
# inner read completes in the loop step that cancels it returns the read and drops the cancel, so
# a server dripping bytes kept a turn alive past turn_timeout until its whole body had come.
if sys.version_info >= (3, 11):
    from asyncio import timeout as _deadline
else:  # aiohttp installs async-timeout below Python 3.11
    from async_timeout import timeout as _deadline

FinishReason = Literal["stop", "length", "abort"]
_Engine = TypeVar("_Engine", bound="HttpEngine")

# SGLang's finish_reason.type values (sglang/srt/managers/schedule_batch.py: FINISH_* to_json()).
_FINISH_TYPES: frozenset[str] = frozenset({"stop", "length", "abort"})
# HTTP statuses worth retrying: request timeout, rate limiting, and every server error.
_RETRY_4XX = frozenset({408, 429})
#: A log prob above 0 by at most this is float rounding of a certain token (p = 1); kept as 0.0.
LOG_PROB_ROUNDING = 1e-5
#: SGLang's ``max_new_tokens`` when a request names none (sglang/srt/sampling/sampling_params.py).
SGLANG_DEFAULT_MAX_NEW_TOKENS = 128
#: Body bytes one generated token may take: its ``[logprob, id, null]`` triple (~40 bytes) and its
#: JSON-escaped share of ``text`` (a long token of escaped non-ASCII is ~100), with a wide margin.
BODY_BYTES_PER_TOKEN = 512
#: Body bytes allowed on top of the per-token bound: ``meta_info``'s other fields, whitespace.
BODY_ALLOWANCE_BYTES = 1 << 20
#: Default deadlines of one SGLang turn (seconds): no progress on a read, and the whole turn.
DEFAULT_READ_TIMEOUT_S = 60.0
DEFAULT_TURN_TIMEOUT_S = 300.0


class EngineError(Exception):
    """An engine call failed."""


class TransientEngineError(EngineError):
    """A failure that may pass on retry (connection refused or reset, 5xx); retries were used up."""


class EngineTimeout(TransientEngineError):
    """The engine gave no complete reply in time: a read made no progress, or the turn ran out."""


class PermanentEngineError(EngineError):
    """A failure a retry cannot fix: a 4xx answer, or a reply that breaks the protocol."""


class EngineContractError(PermanentEngineError):
    """A reply broke the reply contract (see :class:`ReplyContract`).

    ``engine`` names the engine, ``rule`` the rule broken. ``kept`` is set when the reply is usable
    up to a point (more tokens than asked): its first ``max_new_tokens`` tokens, checked.
    """

    def __init__(self, engine: str, rule: str, detail: str, kept: EngineOutput | None = None) -> None:
        super().__init__(f"{engine} broke the reply contract ({rule}): {detail}")
        self.engine, self.rule, self.kept = engine, rule, kept


@dataclasses.dataclass(frozen=True)
class EngineOutput:
    """One generation: the new token ids with their log probs, why it stopped, and its text."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: FinishReason
    text: str = ""
    #: The stop string or stop token id that ended a ``"stop"`` generation, when the engine says.
    matched_stop: int | str | None = None


@runtime_checkable
class Engine(Protocol):
    """Generates a continuation of ``input_ids`` (with ``images`` in placeholder order)."""

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Raise :class:`EngineError` subclasses on failure; an abort is an output, not an error."""
        ...


def engine_name(engine: object) -> str:
    """How errors name ``engine``: its ``name`` attribute if it has a string one, else its class."""
    name = getattr(engine, "name", None)
    return name if isinstance(name, str) and name else type(engine).__name__


@dataclasses.dataclass(frozen=True)
class ReplyContract:
    """What every engine reply must be, checked once per reply by the episode loop.

    Token ids are ints (not bools, not floats) in ``[0, vocab_size)``; there is one log prob per id,
    each a finite real number ``<= 0`` (up to :data:`LOG_PROB_ROUNDING`); the finish reason is one
    SGLang reports (stop, length, abort); there are at most ``max_new_tokens`` ids. A reply with
    more keeps its first ``max_new_tokens`` (``EngineContractError.kept``); any other break rejects
    the whole reply.
    """

    vocab_size: int
    max_new_tokens: int
    engine: str = "engine"

    def check(self, output: EngineOutput) -> EngineOutput:
        """``output`` with ids as ints and log probs as floats; raises :class:`EngineContractError`."""
        ids, log_probs = output.token_ids, output.log_probs
        if output.finish_reason not in _FINISH_TYPES:
            self._broken(
                "a known finish reason", f"{output.finish_reason!r} is not one of {sorted(_FINISH_TYPES)}"
            )
        if len(ids) != len(log_probs):
            self._broken("one log prob per token id", f"{len(ids)} token ids but {len(log_probs)} log probs")
        if set(map(type, ids)) - {int}:  # fast paths first: this runs on the event loop every turn
            ids = [self._token_id(i, t) for i, t in enumerate(ids)]
        low, high = (min(ids), max(ids)) if ids else (0, 0)
        if low < 0 or high >= self.vocab_size:
            i, t = next((i, t) for i, t in enumerate(ids) if not 0 <= t < self.vocab_size)
            self._broken(
                "token ids in [0, vocab_size)",
                f"token id {t} at position {i} is outside [0, {self.vocab_size})",
            )
        plain = not set(map(type, log_probs)) - {float}  # a sum is not finite if any term is not
        if not (plain and max(log_probs, default=0.0) <= 0.0 and math.isfinite(sum(log_probs))):
            log_probs = [self._log_prob(i, lp) for i, lp in enumerate(log_probs)]
        checked = dataclasses.replace(output, token_ids=list(ids), log_probs=list(log_probs))
        if len(ids) > self.max_new_tokens:
            kept = dataclasses.replace(
                checked,
                token_ids=checked.token_ids[: self.max_new_tokens],
                log_probs=checked.log_probs[: self.max_new_tokens],
                finish_reason="length",
            )
            n = self.max_new_tokens
            self._broken(
                "at most max_new_tokens",
                f"{len(ids)} tokens for max_new_tokens={n}; the first {n} kept",
                kept,
            )
        return checked

    def _token_id(self, position: int, token: Any) -> int:
        if isinstance(token, numbers.Integral) and not isinstance(token, bool):
            return int(token)
        self._broken(
            "token ids are ints", f"token id {token!r} at position {position} is a {type(token).__name__}"
        )

    def _log_prob(self, position: int, value: Any) -> float:
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            self._broken(
                "log probs are numbers",
                f"log prob {value!r} at position {position} is a {type(value).__name__}",
            )
        value = float(value)
        if not math.isfinite(value):
            hint = " (did return_logprob reach the server?)"
            self._broken("log probs are finite and <= 0", f"log prob {value!r} at position {position}{hint}")
        if value > LOG_PROB_ROUNDING:
            self._broken("log probs are finite and <= 0", f"log prob {value!r} at position {position} is > 0")
        return min(value, 0.0)

    def _broken(self, rule: str, detail: str, kept: EngineOutput | None = None) -> NoReturn:
        raise EngineContractError(self.engine, rule, detail, kept)


def parse_generate_response(body: Any, engine: str = "sglang") -> EngineOutput:
    """An :class:`EngineOutput` from a decoded ``/generate`` reply, values as the server sent them.

    Only the reply's shape is checked here (:class:`EngineContractError` if it is malformed); its
    values are :class:`ReplyContract`'s to check, so a float or bool token id is never made an int.
    """
    try:
        meta = body["meta_info"]
        finish = meta["finish_reason"] or {}
        kind = finish["type"]
        triples = meta.get("output_token_logprobs")
        text = body.get("text", "")
    except (KeyError, TypeError, AttributeError) as err:
        detail = f"malformed /generate reply ({type(err).__name__}: {err})"
        raise EngineContractError(engine, "reply shape", detail) from err
    if triples is None and kind == "abort":
        triples = []
    if not isinstance(triples, list):
        detail = (
            "malformed /generate reply: no output_token_logprobs list (did return_logprob reach the server?)"
        )
        raise EngineContractError(engine, "reply shape", detail)
    if not all(isinstance(t, list) and len(t) >= 2 for t in triples):
        i, t = next((i, t) for i, t in enumerate(triples) if not (isinstance(t, list) and len(t) >= 2))
        detail = f"output_token_logprobs[{i}] is {str(t)[:80]}, not [log prob, token id, ...]"
        raise EngineContractError(engine, "one log prob per token id", detail)
    if not isinstance(text, str):
        raise EngineContractError(
            engine, "reply shape", f"reply text is a {type(text).__name__}, not a string"
        )
    matched = finish.get("matched") if isinstance(finish, dict) else None
    return EngineOutput(
        token_ids=[t[1] for t in triples],
        log_probs=[t[0] for t in triples],
        finish_reason=kind,
        text=text,
        matched_stop=matched if isinstance(matched, int | str) else None,
    )


def check_limits(read_timeout: float, turn_timeout: float) -> None:
    """Raise ``ValueError`` unless both deadlines are a positive, finite number of seconds."""
    for label, value in (("read_timeout", read_timeout), ("turn_timeout", turn_timeout)):
        if not (isinstance(value, int | float) and 0 < value < math.inf):
            raise ValueError(f"{label} must be a positive number of seconds, got {value!r}")


class HttpEngine:
    """The HTTP transport of the token-in/token-out clients: one JSON ``POST`` per turn, bounded.

    One pooled ``aiohttp`` session per event loop. Connection errors, 5xx (and 408/429) and stalled
    reads are retried up to ``max_retries`` times with jittered exponential backoff from ``backoff``
    seconds (capped at ``max_backoff``); other 4xx and invalid JSON fail at once.

    Each call is bounded in time and memory:

    - ``turn_timeout`` (default 300 s) caps the whole call, every attempt and backoff included;
      past it the call raises :class:`EngineTimeout`. The engine sends nothing until a generation is
      done, so this is also the longest a generation may take: raise it for long generations on a
      loaded server.
    - ``read_timeout`` (default 60 s): an attempt whose connection, or whose reply body once
      started, makes no progress for this long fails (and is retried).
    - The body is read incrementally and may hold at most ``max_body_bytes``; by default
      :data:`BODY_BYTES_PER_TOKEN` per requested new token plus :data:`BODY_ALLOWANCE_BYTES`
      (1.03 MB for 64 new tokens). A longer body fails at once, without being buffered.

    Subclasses name the endpoint (``path``, ``kind``) and turn a call into a payload and a reply
    into an :class:`EngineOutput`.
    """

    #: The endpoint under the base URL, and the word errors use for it.
    path: str = ""
    kind: str = "engine"

    def __init__(
        self,
        base_url: str,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT_S,
        turn_timeout: float = DEFAULT_TURN_TIMEOUT_S,
        max_body_bytes: int | None = None,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_connections: int = 1024,
    ) -> None:
        check_limits(read_timeout, turn_timeout)
        if max_body_bytes is not None and max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes!r}")
        self.url = base_url.rstrip("/") + self.path
        self.name = f"{self.kind} {base_url.rstrip('/')}"
        self.read_timeout = float(read_timeout)
        self.turn_timeout = float(turn_timeout)
        self.max_body_bytes = max_body_bytes
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(limit=self.max_connections)
            self._session = aiohttp.ClientSession(connector=connector)
            self._session_loop = loop
        return self._session

    async def close(self) -> None:
        """Close the pooled session (a later call opens a new one)."""
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def __aenter__(self: _Engine) -> _Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def body_limit(self, sampling_params: Mapping[str, Any]) -> int:
        """The most body bytes a reply to a request with these (SGLang) ``sampling_params`` may hold."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        new = sampling_params.get("max_new_tokens")
        new = new if isinstance(new, int) and new >= 0 else SGLANG_DEFAULT_MAX_NEW_TOKENS
        return new * BODY_BYTES_PER_TOKEN + BODY_ALLOWANCE_BYTES

    async def _images(self, images: Sequence[ImageInput]) -> list[str]:
        """``images`` as data URIs, in order."""
        if all(isinstance(im, str) for im in images):
            return list(images)  # type: ignore[arg-type]
        # PNG encoding on cache misses is CPU work: keep it off the event loop
        return await asyncio.to_thread(lambda: [image_data_uri(im) for im in images])

    async def _post(self, payload: dict[str, Any], limit: int) -> Any:
        """``payload`` posted to :attr:`url`; the decoded JSON reply of at most ``limit`` bytes."""
        errors: list[TransientEngineError] = []  # filled by _attempts, read here if the turn runs out
        try:
            async with _deadline(self.turn_timeout):
                return await self._attempts(payload, limit, errors)
        except asyncio.TimeoutError:  # every timeout inside is an EngineError: this is the turn's
            last = f"; last error: {errors[-1]}" if errors else ""
            raise EngineTimeout(
                f"{self.name}: no complete reply within turn_timeout={self.turn_timeout:g} s "
                f"({len(errors) + 1} attempt(s){last})"
            ) from None

    async def _attempts(self, payload: dict[str, Any], limit: int, errors: list[TransientEngineError]) -> Any:
        session = self._get_session()
        data = json.dumps(payload)
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            try:
                return await self._attempt(session, data, limit)
            except TransientEngineError as err:
                errors.append(err)
        raise errors[-1]

    async def _attempt(self, session: aiohttp.ClientSession, data: str, limit: int) -> Any:
        """One request; transport failures become :class:`TransientEngineError`."""
        # No read timeout while waiting for the headers: they come when the generation is done.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.read_timeout)
        try:
            async with session.post(
                self.url,
                data=data,
                headers={"Content-Type": "application/json"},
                timeout=timeout,
                allow_redirects=False,  # a redirect is the answer: never send the prompt to another host
            ) as resp:
                if resp.status != 200:
                    excerpt = (await self._read(resp.content.read(300))).decode("utf-8", errors="replace")
                    message = f"{self.name}: {self.path} answered HTTP {resp.status}: {excerpt}"
                    message += redirect_note(resp)
                    if resp.status >= 500 or resp.status in _RETRY_4XX:
                        raise TransientEngineError(message)
                    raise PermanentEngineError(message)
                body = await read_capped(resp, limit, self._read)
        except BodyTooLarge as err:
            raise EngineContractError(self.name, f"a body of at most {limit} bytes", str(err)) from None
        except asyncio.TimeoutError:  # connecting took longer than read_timeout
            raise EngineTimeout(
                f"{self.name}: no connection within read_timeout={self.read_timeout:g} s"
            ) from None
        except aiohttp.ClientError as err:
            raise TransientEngineError(
                f"{self.name}: {self.path} connection failed: {type(err).__name__}: {err}"
            ) from err
        try:
            return json.loads(body)
        except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
            raise PermanentEngineError(f"{self.name}: {self.path} replied with invalid JSON: {err}") from err

    async def _read(self, read: Any) -> bytes:
        """Await one read of the body; no progress for ``read_timeout`` fails the attempt."""
        try:
            async with _deadline(self.read_timeout):
                return await read
        except asyncio.TimeoutError:
            raise EngineTimeout(
                f"{self.name}: the reply made no progress for read_timeout={self.read_timeout:g} s"
            ) from None


class SGLangEngine(HttpEngine):
    """A client of SGLang's native ``POST /generate`` with ``return_logprob`` (limits: :class:`HttpEngine`).

    ``timeout``, the single limit of earlier releases, is refused with a ``TypeError`` that names
    ``read_timeout`` and ``turn_timeout``, which replaced it.
    """

    path, kind = "/generate", "sglang"

    def __init__(self, base_url: str, *, timeout: float | None = None, **limits: Any) -> None:
        if timeout is not None:  # the one timeout of earlier releases, split in two
            raise TypeError(
                f"SGLangEngine no longer takes timeout={timeout!r}: pass read_timeout= (seconds an attempt "
                "may make no progress, default 60) and turn_timeout= (seconds the whole call may take, "
                "retries included, default 300)"
            )
        super().__init__(base_url, **limits)

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Generate from ``input_ids``; images go as data URIs in placeholder order."""
        payload: dict[str, Any] = {
            "input_ids": list(input_ids),
            "sampling_params": dict(sampling_params),
            "return_logprob": True,
        }
        if images:
            payload["image_data"] = await self._images(images)
        reply = await self._post(payload, self.body_limit(sampling_params))
        return parse_generate_response(reply, self.name)
