"""Whether a model server answers at all, asked once before a run starts."""

from __future__ import annotations

import asyncio

import aiohttp


async def unreachable(session: aiohttp.ClientSession, url: str, timeout: float = 10.0) -> str | None:
    """Why nothing answered ``GET url`` within ``timeout`` seconds, or ``None`` if something did.

    Any status counts as an answer, and only the status line is read: a body, of any size, is not.
    """
    try:
        # a redirect is an answer too: the probe goes to the named host only
        async with session.get(
            url, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False
        ) as resp:
            resp.close()
    except (aiohttp.ClientError, asyncio.TimeoutError) as err:
        return f"{type(err).__name__}: {err}"
    return None
