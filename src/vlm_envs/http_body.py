"""An HTTP reply's body read with a cap on its size: a server or a proxy in between may send
megabytes, and nothing of them should be read past the cap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp


def redirect_note(resp: aiohttp.ClientResponse) -> str:
    """What a client that follows no redirect says of a 3xx answer (``""`` for any other status): a
    prompt, its images or an API key never go to a host the user did not name."""
    if not 300 <= resp.status < 400:
        return ""
    target = resp.headers.get("Location", "?")
    return f" (a redirect to {target!r:.200}; vlm-envs follows none: give the server's own URL)"


class BodyTooLarge(Exception):
    """The body passed the cap; the connection was dropped. The message says what was seen."""


async def _as_is(read: Awaitable[bytes]) -> bytes:
    return await read


async def read_capped(
    resp: aiohttp.ClientResponse,
    limit: int,
    wait: Callable[[Awaitable[bytes]], Awaitable[bytes]] = _as_is,
) -> bytes:
    """The whole body of ``resp``, read chunk by chunk; :class:`BodyTooLarge` past ``limit`` bytes
    (a ``Content-Length`` over it fails before reading). ``wait`` awaits each read (to give it a
    deadline, say)."""
    if resp.content_length is not None and resp.content_length > limit:
        resp.close()
        raise BodyTooLarge(f"Content-Length is {resp.content_length} bytes")
    chunks, size = [], 0
    while chunk := await wait(resp.content.readany()):
        size += len(chunk)
        if size > limit:
            resp.close()  # drop the connection rather than drain the rest
            raise BodyTooLarge(f"more than {limit} bytes arrived")
        chunks.append(chunk)
    return b"".join(chunks)
