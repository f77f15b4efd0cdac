"""Inference engines: token ids and images in; token ids, log probs and a finish reason out.

:class:`Engine` is the small interface the episode loop talks to; :class:`SGLangEngine` speaks
SGLang's native ``/generate`` over pooled async HTTP, retrying transient failures only. Returned
token ids come from ``meta_info.output_token_logprobs``; returned text is never re-tokenized.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import math
import random
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import aiohttp
from PIL import Image

from vlm_envs.imaging import png_data_uri
from vlm_envs.rollout.images import image_digest

FinishReason = Literal["stop", "length", "abort"]
ImageInput = str | bytes | Image.Image

# SGLang's finish_reason.type values (sglang/srt/managers/schedule_batch.py: FINISH_* to_json()).
_FINISH_TYPES: frozenset[str] = frozenset({"stop", "length", "abort"})
# HTTP statuses worth retrying: request timeout, rate limiting, and every server error.
_RETRY_4XX = frozenset({408, 429})


class EngineError(Exception):
    """An engine call failed."""


class TransientEngineError(EngineError):
    """A failure that may pass on retry (connection refused or reset, 5xx); retries were used up."""


class EngineTimeout(TransientEngineError):
    """The engine did not answer within the per-request timeout, on every attempt."""


class PermanentEngineError(EngineError):
    """A failure a retry cannot fix: a 4xx answer, or a reply that breaks the protocol."""


@dataclasses.dataclass(frozen=True)
class EngineOutput:
    """One generation: the new token ids with their log probs, why it stopped, and its text."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: FinishReason
    text: str = ""
    #: The stop string or stop token id that ended a ``"stop"`` generation, when the engine says.
    matched_stop: int | str | None = None

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.log_probs):
            raise ValueError(f"{len(self.token_ids)} token ids but {len(self.log_probs)} log probs")


@runtime_checkable
class Engine(Protocol):
    """Generates a continuation of ``input_ids`` (with ``images`` in placeholder order)."""

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Raise :class:`EngineError` subclasses on failure; an abort is an output, not an error."""
        ...


class _UriCache:
    """A thread-safe LRU of PNG data URIs keyed by image content, bounded by total characters."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get_or_make(self, image: Image.Image, key: str | None) -> str:
        key = key or image_digest(image)
        with self._lock:
            uri = self._items.get(key)
            if uri is not None:
                self._items.move_to_end(key)
                return uri
        uri = png_data_uri(image)
        with self._lock:
            if key not in self._items and len(uri) <= self.max_chars:
                self._items[key] = uri
                self._chars += len(uri)
                while self._chars > self.max_chars:
                    self._chars -= len(self._items.popitem(last=False)[1])
        return uri


_URI_CACHE = _UriCache(max_chars=256 << 20)
_MAGIC_MIME = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"RIFF", "image/webp"))


def image_data_uri(image: ImageInput, key: str | None = None) -> str:
    """An image as SGLang's ``image_data`` takes it.

    A PIL image becomes a PNG data URI, cached by content: ``key`` is its :func:`image_digest` if
    known (``ProcessedImage.key``), which saves hashing it again. Encoded bytes (PNG, JPEG, WebP)
    become a data URI of their own type; a string (data URI, URL, path) passes unchanged.
    """
    if isinstance(image, str):
        return image
    if isinstance(image, Image.Image):
        return _URI_CACHE.get_or_make(image, key)
    if isinstance(image, bytes | bytearray):
        mime = next((m for magic, m in _MAGIC_MIME if image.startswith(magic)), None)
        if mime is None:
            raise ValueError("image bytes are not PNG, JPEG or WebP")
        return f"data:{mime};base64," + base64.b64encode(image).decode("ascii")
    raise TypeError(f"an image must be a PIL image, encoded bytes or a string, not {type(image).__name__}")


def parse_generate_response(body: Any) -> EngineOutput:
    """An :class:`EngineOutput` from a decoded ``/generate`` reply.

    Raises :class:`PermanentEngineError` if the reply is malformed.
    """
    try:
        meta = body["meta_info"]
        finish = meta["finish_reason"] or {}
        kind = finish["type"]
        triples = meta.get("output_token_logprobs")
        if triples is None:
            triples = [] if kind == "abort" else None
        pairs = [(float(t[0]), int(t[1])) for t in triples]  # type: ignore[union-attr]
        text = body.get("text", "")
    except (KeyError, TypeError, ValueError, IndexError) as err:
        raise PermanentEngineError(f"malformed /generate reply ({type(err).__name__}: {err})") from err
    if kind not in _FINISH_TYPES:
        raise PermanentEngineError(f"unknown finish_reason type {kind!r}")
    if not all(math.isfinite(lp) for lp, _ in pairs):
        raise PermanentEngineError(
            "the reply holds a non-finite log prob (did return_logprob reach the server?)"
        )
    if not isinstance(text, str):
        raise PermanentEngineError(f"reply text is a {type(text).__name__}, not a string")
    matched = finish.get("matched")
    return EngineOutput(
        token_ids=[t for _, t in pairs],
        log_probs=[lp for lp, _ in pairs],
        finish_reason=kind,
        text=text,
        matched_stop=matched if isinstance(matched, int | str) else None,
    )


class SGLangEngine:
    """A client of SGLang's native ``POST /generate`` with ``return_logprob``.

    One pooled ``aiohttp`` session per event loop; ``timeout`` seconds per attempt; connection
    errors, timeouts, 5xx (and 408/429) are retried up to ``max_retries`` times with jittered
    exponential backoff from ``backoff`` seconds (capped at ``max_backoff``); other 4xx and
    malformed replies fail at once.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 600.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        max_connections: int = 1024,
    ) -> None:
        self.url = base_url.rstrip("/") + "/generate"
        self.timeout = timeout
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

    async def __aenter__(self) -> SGLangEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def generate(
        self, input_ids: Sequence[int], images: Sequence[ImageInput], sampling_params: Mapping[str, Any]
    ) -> EngineOutput:
        """Generate from ``input_ids``; images go as data URIs in placeholder order."""
        if all(isinstance(im, str) for im in images):
            image_data = list(images)
        else:  # PNG encoding on cache misses is CPU work: keep it off the event loop
            image_data = await asyncio.to_thread(lambda: [image_data_uri(im) for im in images])
        payload: dict[str, Any] = {
            "input_ids": list(input_ids),
            "sampling_params": dict(sampling_params),
            "return_logprob": True,
        }
        if image_data:
            payload["image_data"] = image_data
        return parse_generate_response(await self._post(payload))

    async def _post(self, payload: dict[str, Any]) -> Any:
        session = self._get_session()
        data = json.dumps(payload)
        last: TransientEngineError | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                delay = min(self.max_backoff, self.backoff * 2 ** (attempt - 1))
                await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            try:
                async with session.post(
                    self.url,
                    data=data,
                    headers={"Content-Type": "application/json"},
                    timeout=aiohttp.ClientTimeout(total=self.timeout),
                ) as resp:
                    body = await resp.read()
                    if resp.status == 200:
                        try:
                            return json.loads(body)
                        except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
                            raise PermanentEngineError(f"/generate replied with invalid JSON: {err}") from err
                    excerpt = body[:300].decode("utf-8", errors="replace")
                    message = f"/generate answered HTTP {resp.status}: {excerpt}"
                    if resp.status >= 500 or resp.status in _RETRY_4XX:
                        last = TransientEngineError(message)
                        continue
                    raise PermanentEngineError(message)
            except asyncio.TimeoutError:
                last = EngineTimeout(f"/generate gave no answer within {self.timeout} s")
            except aiohttp.ClientError as err:
                last = TransientEngineError(f"/generate connection failed: {type(err).__name__}: {err}")
        assert last is not None
        raise last
