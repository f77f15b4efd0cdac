"""Where a :class:`~vlm_envs.remote.RemoteEnv`'s server is: its URL checked, several taken in round
robin, its WebSocket endpoint and the connection to it, the deadline of a connection or reply, and what
to do about a refused handshake.
"""

from __future__ import annotations

import itertools
import math
import numbers
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from vlm_envs.remote_wire import one_line
from vlm_envs.serve.config import TOKEN_ENV, is_loopback

#: The longest wait for a connection or a reply a RemoteEnv may be given (seconds).
MAX_TIMEOUT_S = 3600.0
#: The URL schemes of a server: its HTTP base or its WebSocket.
URL_SCHEMES = ("http", "https", "ws", "wss")
#: The largest reply taken from a server (bytes): a few big images per observation fit easily.
MAX_REPLY_BYTES = 64 << 20
#: Frames buffered ahead of the one being read: a server that floods frames is read no further.
MAX_QUEUED_FRAMES = 2
_turns: dict[tuple[str, ...], itertools.count] = {}
_turns_lock = threading.Lock()


def next_url(urls: Sequence[str]) -> str:
    """The next of ``urls`` in round robin (shared by every RemoteEnv of the same URL list)."""
    key = tuple(urls)
    with _turns_lock:
        counter = _turns.setdefault(key, itertools.count())
        return key[next(counter) % len(key)]


def open_websocket(url: str, token: str | None, timeout_s: float) -> Any:
    """A synchronous ``websockets`` connection to the server at ``url`` (its ``/ws``), opened within
    ``timeout_s``, following no redirect; raises what ``websockets`` raises."""
    from websockets.sync.client import connect

    target = ws_url(url)
    local = is_loopback(urlsplit(target).hostname or "")
    connecter = connect(
        target,
        additional_headers={"Authorization": f"Bearer {token}"} if token else None,
        open_timeout=timeout_s,
        close_timeout=min(timeout_s, 10.0),
        max_size=MAX_REPLY_BYTES,
        max_queue=MAX_QUEUED_FRAMES,
        proxy=None if local else True,
        legacy=False,
    )
    # websockets follows redirects, to other hosts too: an episode, its images and the token go only to
    # the server the user named, so a 3xx answer is the error itself
    connecter.process_redirect = no_redirect
    return connecter.connect()


def no_redirect(exc: Exception) -> Exception:
    """websockets' redirect hook, answering every failed handshake (a 3xx included) with its error."""
    return exc


def cannot_connect(url: str, err: Exception) -> str:
    """Why no session could be opened on the server at ``url``, on one line, with what to do about it."""
    return f"cannot open a session on {ws_url(url)}: {one_line(err)}{handshake_hint(err)}"


def handshake_hint(err: Exception) -> str:
    """What to do about a refused handshake: a token to give, or the server's own URL."""
    response = getattr(err, "response", None)
    status = getattr(response, "status_code", 0)
    if 300 <= status < 400:
        target = response.headers.get("Location", "?")
        return f" (a redirect to {target!r:.200}; vlm-envs follows none: give the server's own URL)"
    return f" (set ${TOKEN_ENV} or token=...)" if status in (401, 403) else ""


def ws_url(url: str) -> str:
    """A server's base URL (``http(s)://`` or ``ws(s)://``, :func:`check_url`) as its ``/ws`` endpoint."""
    base = url.rstrip("/")
    for plain, secure in (("http://", "ws://"), ("https://", "wss://")):
        if base.startswith(plain):
            base = secure + base[len(plain) :]
    return base if base.endswith("/ws") else base + "/ws"


def check_url(url: Any) -> str:
    """``url`` if it names a server: ``http``, ``https``, ``ws`` or ``wss``, a host, no credentials,
    query or fragment; ``ValueError`` otherwise."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"url must be a server URL or a list of them, got {url!r:.80}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as err:
        raise ValueError(f"url {url!r:.80} is not a URL: {err}") from None
    if parts.scheme not in URL_SCHEMES or not parts.hostname:
        raise ValueError(f"url {url!r:.80} must be http(s):// or ws(s):// and name a host")
    if parts.username is not None or parts.query or parts.fragment:
        raise ValueError(
            f"url {url!r:.80} may not carry credentials, a query or a fragment (the token goes in token=...)"
        )
    return url


def check_timeout(timeout_s: Any) -> float:
    """``timeout_s`` as seconds: a finite number, > 0 and at most :data:`MAX_TIMEOUT_S`."""
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real):
        raise ValueError(f"timeout_s must be a number of seconds, got {timeout_s!r:.40}")
    if not (math.isfinite(timeout_s) and 0 < timeout_s <= MAX_TIMEOUT_S):
        raise ValueError(f"timeout_s must be > 0 and at most {MAX_TIMEOUT_S:g} s, got {timeout_s!r:.40}")
    return float(timeout_s)
