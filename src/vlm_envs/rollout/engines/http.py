"""The HTTP transport of the token-in/token-out engines: one bounded JSON ``POST`` per turn.

Pooled async HTTP, retrying transient failures only, with a bounded body, a read deadline and a
per-turn deadline (:func:`deadline`, also what other transports use to end a turn in time).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import aiohttp

from vlm_envs.http_body import BodyTooLarge, read_capped, redirect_note
from vlm_envs.rollout.engines.contract import (
    EngineContractError,
    EngineTimeout,
    PermanentEngineError,
    TransientEngineError,
)
from vlm_envs.rollout.engines.image_uris import ImageInput, image_data_uri

# A deadline that cancels the task itself. Not asyncio.wait_for: up to Python 3.11, a wait_for whose
# inner read completes in the loop step that cancels it returns the read and drops the cancel, so
# a server dripping bytes kept a turn alive past turn_timeout until its whole body had come.
if sys.version_info >= (3, 11):
    from asyncio import timeout as deadline
else:  # aiohttp installs async-timeout below Python 3.11
    from async_timeout import timeout as deadline

_Engine = TypeVar("_Engine", bound="HttpEngine")

# HTTP statuses worth retrying: request timeout, rate limiting, and every server error.
_RETRY_4XX = frozenset({408, 429})
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
            async with deadline(self.turn_timeout):
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
            async with deadline(self.read_timeout):
                return await read
        except asyncio.TimeoutError:
            raise EngineTimeout(
                f"{self.name}: the reply made no progress for read_timeout={self.read_timeout:g} s"
            ) from None
