"""The server's connections: caps on how many are open, and deadlines on how slowly a client may talk.

uvicorn (0.54) reads a connection with no deadline until its request headers are complete and has no
cap on open connections, so a few thousand clients that send half a request line and stall hold the
server's files until no one else can connect (slowloris). Here, on top of uvicorn's own protocols
(HTTP/1.1 through ``h11``: :class:`~uvicorn.protocols.http.h11_impl.H11Protocol`; WebSockets through
``websockets``' sans-I/O protocol, which an upgraded HTTP connection hands its socket to):

- a new connection is refused (closed at once, before a byte is read) past ``max_connections`` open
  ones, or past ``max_connections_per_peer`` from its peer's address; a WebSocket keeps its place
  until it closes (a trainer's sessions are WebSockets from one peer);
- a request's headers must arrive within ``header_timeout_s`` of the connection (or, on a kept-alive
  connection, of the request's first byte), and its body within ``header_timeout_s`` of its headers
  (the body cap bounds its size, not its pace); an idle kept-alive connection closes after
  ``keep_alive_s`` (uvicorn's own timer);
- a client that leaves a reply unread for ``header_timeout_s`` (the socket's buffers full, writing
  paused) is dropped, HTTP or WebSocket.

Nothing is answered to a connection dropped for a deadline or refused: it is closed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import resource
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from vlm_envs.serve.config import ServeConfig, ServeConfigError
from vlm_envs.serve.metrics import ServeMetrics

#: Files the server holds beside its connections (listening socket, logs, imports), plus per worker.
FILE_MARGIN = 256
FILES_PER_WORKER = 8
#: Messages of a WebSocket that may wait for the app before the socket is no longer read.
MESSAGES_AHEAD = 2


class ConnectionGuard:
    """The open connections by peer address, the caps they are admitted under and the deadlines the
    protocols keep. One per server; everything runs on its event loop (no locks)."""

    def __init__(self, config: ServeConfig, metrics: ServeMetrics) -> None:
        self.max_connections = config.max_connections
        self.max_per_peer = config.max_connections_per_peer
        self.header_timeout_s = config.header_timeout_s
        self.metrics = metrics
        self._peers: dict[asyncio.BaseTransport, str] = {}
        self._by_peer: collections.Counter[str] = collections.Counter()

    def admit(self, transport: asyncio.BaseTransport, peer: str) -> bool:
        """Whether a new connection from ``peer`` may stay open; a refusal is counted by cause."""
        if len(self._peers) >= self.max_connections:
            self.metrics.refused("connections")
            return False
        if self._by_peer[peer] >= self.max_per_peer:
            self.metrics.refused("peer")
            return False
        self._peers[transport] = peer
        self._by_peer[peer] += 1
        self.metrics.connections = len(self._peers)
        return True

    def release(self, transport: asyncio.BaseTransport) -> None:
        """``transport`` closed (nothing for one that was refused or released already)."""
        peer = self._peers.pop(transport, None)
        if peer is None:
            return
        self._by_peer[peer] -= 1
        if not self._by_peer[peer]:
            del self._by_peer[peer]
        self.metrics.connections = len(self._peers)

    def http(self, **kwargs: Any) -> GuardedHttp:
        """A new HTTP connection's protocol (uvicorn.Config's ``http``, called as uvicorn calls a class)."""
        return GuardedHttp(self, **kwargs)

    def websocket(self, **kwargs: Any) -> GuardedWebSocket:
        """An upgraded connection's protocol (uvicorn.Config's ``ws``)."""
        return GuardedWebSocket(self, **kwargs)


class _WriteStall:
    """A connection whose client leaves a reply unread (writing paused) for ``header_timeout_s`` is
    dropped. Mixed into both protocols; ``transport``, ``loop`` and ``guard`` are theirs."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    guard: ConnectionGuard
    write_stall: asyncio.TimerHandle | None = None

    def pause_writing(self) -> None:
        super().pause_writing()  # type: ignore[misc]
        if self.write_stall is None:
            self.write_stall = self.loop.call_later(self.guard.header_timeout_s, self.transport.abort)

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]
        self.stop_write_stall()

    def stop_write_stall(self) -> None:
        if self.write_stall is not None:
            self.write_stall.cancel()
            self.write_stall = None


class GuardedHttp(_WriteStall, H11Protocol):
    """uvicorn's h11 protocol with the guard's caps and deadlines (hooks read from uvicorn 0.54's
    ``h11_impl``: ``conn`` is the connection's ``h11.Connection``, ``client`` its peer address).

    ``phase`` is what the deadline timer waits for: ``head`` (request headers), ``body`` (the rest of
    the request), ``idle`` (between requests: uvicorn's keep-alive timer is in charge) or ``None``
    (the request is in, the app is answering: no deadline).
    """

    def __init__(self, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.guard = guard
        self.phase: str | None = "head"
        self.deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        peer = self.client[0] if self.client else ""
        if not self.guard.admit(transport, peer):
            transport.abort()
            return
        self.arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        self.stop_write_stall()
        self.guard.release(self.transport)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.get_protocol() is self:  # not handed to a WebSocket protocol
            self.watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.watch()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self.disarm()
        self.phase = None
        super().handle_websocket_upgrade(event)

    def watch(self) -> None:
        """Move the deadline to what the connection now waits for from its client."""
        state = self.conn.their_state
        if state is h11.IDLE:
            started = bool(self.conn.trailing_data[0])  # part of the next request is in
            phase = "head" if started or self.phase == "head" else "idle"
        elif state is h11.SEND_BODY:
            phase = "body"
        else:
            phase = None
        if phase != self.phase:
            self.phase = phase
            if phase in ("head", "body"):
                self.arm()
            else:
                self.disarm()

    def arm(self) -> None:
        self.disarm()
        self.deadline = self.loop.call_later(self.guard.header_timeout_s, self.transport.abort)

    def disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None


class GuardedWebSocket(_WriteStall, WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (``websockets``' sans-I/O one): its connection keeps the place the
    HTTP connection it was upgraded from took, until it closes.

    uvicorn (0.54, ``websockets_sansio_impl``) stops reading the socket each time a message arrives and
    reads again once the app has taken it: two ``epoll_ctl`` calls per message of a client that waits
    for each reply. Here reading stops only while :data:`MESSAGES_AHEAD` messages wait for the app, so
    a client sending without reading is still held back, one that waits is not.
    """

    def __init__(self, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.guard = guard

    def send_receive_event_to_app(self) -> None:
        if self.queue.qsize() + 1 < MESSAGES_AHEAD:  # uvicorn pauses unless it reads its flag as paused
            self.read_paused = True  # its receive() then resumes reading: a no-op on a reading socket
        else:
            self.read_paused = not self.transport.is_reading()
        super().send_receive_event_to_app()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_write_stall()
        self.guard.release(self.transport)
        super().connection_lost(exc)


def raise_file_limit(config: ServeConfig) -> int:
    """Raise this process's soft limit on open files to its hard limit; :class:`ServeConfigError` if
    ``max_connections`` does not fit under it with a margin. Returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = config.max_connections + FILE_MARGIN + FILES_PER_WORKER * config.workers
    target = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):  # if not, the check below says whether it is enough
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    if soft != resource.RLIM_INFINITY and soft < needed:
        raise ServeConfigError(
            f"--max-connections {config.max_connections} needs {needed} open files but this process may "
            f"open {soft} (ulimit -n): lower --max-connections or raise the limit"
        )
    return soft
