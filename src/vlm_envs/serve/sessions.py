"""The session table: who holds which worker, limits, idle sessions and sessions lost with a worker.

Everything here runs on the server's event loop (no locks). A session is one episode partner: a
WebSocket connection, or an HTTP client holding the ``session_id`` that ``/reset`` answered. It
lives on one worker, chosen least loaded when it opens; when that worker dies the session is
*lost*: its next call answers the reason (an HTTP session then stays a tombstone, a WebSocket one
moves to a live worker for its next reset). A closed session is marked so (:attr:`Session.closed`): a
call that was waiting for its lock answers that instead of reaching the worker.
"""

from __future__ import annotations

import asyncio
import collections
import secrets
import time
from collections.abc import Callable

#: Tombstones of lost or reaped HTTP sessions kept for their next call's answer.
TOMBSTONES = 10_000
#: How every answer about a session lost with its worker begins (``RemoteEnv`` restores such an episode).
LOST = "session lost"
#: How a draining server's refusals begin (``RemoteEnv`` restores such an episode on another server).
SHUTTING_DOWN = "the server is shutting down"


def lost_reason(reason: str) -> str:
    """What a lost HTTP session's later calls answer."""
    return f"{LOST}: {reason}; reset without a session_id to open a new one"


#: What a call waiting on a session that its client closed meanwhile answers.
CLOSED = "session closed: reset without a session_id to open a new one"


class Refused(Exception):
    """No new session now (capacity or shutdown); the message says why."""


class UnknownSession(Exception):
    """No session has that id."""


class LostSession(Exception):
    """The session existed but is gone; the message says why."""


class Session:
    """One session: where it lives and when it last did something."""

    def __init__(self, session_id: str, worker: int, generation: int, websocket: bool) -> None:
        self.id = session_id
        self.worker = worker
        self.generation = generation
        self.websocket = websocket
        self.last_active = time.monotonic()
        self.lock = asyncio.Lock()  # one call at a time per session: its env is not reentrant
        self.lost: str | None = None
        self.closed: str | None = None  # why the session was closed, once it is
        self.on_close: Callable[[str], None] | None = None  # a WebSocket's way to be closed

    def touch(self) -> None:
        self.last_active = time.monotonic()


class Sessions:
    """At most ``max_sessions`` sessions over ``workers`` workers, closed after ``idle_timeout_s``."""

    def __init__(
        self,
        max_sessions: int,
        idle_timeout_s: float,
        workers: int,
        generation: Callable[[int], int],
        refused: Callable[[str], None] = lambda cause: None,
    ) -> None:
        self.max_sessions = max_sessions
        self.refused = refused  # told "capacity" for each session refused at the cap
        self.idle_timeout_s = idle_timeout_s
        self._generation = generation
        self._by_id: dict[str, Session] = {}
        self._load = [0] * workers
        self._tombstones: collections.OrderedDict[str, str] = collections.OrderedDict()
        self.draining = False

    def __len__(self) -> int:
        return len(self._by_id)

    def open(self, websocket: bool) -> Session:
        """A new session on the least loaded worker; :class:`Refused` at capacity or while draining."""
        if self.draining:
            raise Refused(f"{SHUTTING_DOWN}: no new sessions")
        if len(self._by_id) >= self.max_sessions:
            self.refused("capacity")
            raise Refused(
                f"the server holds its maximum of {self.max_sessions} sessions (--max-sessions): "
                "try again later or another server"
            )
        worker = min(range(len(self._load)), key=self._load.__getitem__)
        session = Session(secrets.token_hex(16), worker, self._generation(worker), websocket)
        self._by_id[session.id] = session
        self._load[worker] += 1
        return session

    def get(self, session_id: str) -> Session:
        """The live session ``session_id``; :class:`LostSession` or :class:`UnknownSession` if none."""
        session = self._by_id.get(session_id)
        if session is not None:
            return session
        if session_id in self._tombstones:
            raise LostSession(self._tombstones[session_id])
        raise UnknownSession(f"unknown session {session_id[:64]!r}: reset without a session_id to open one")

    def close(self, session: Session, reason: str | None = None) -> None:
        """Forget ``session``; with ``reason`` its id answers that reason for a while."""
        session.closed = session.closed or reason or CLOSED
        if self._by_id.pop(session.id, None) is not None:
            self._load[session.worker] -= 1
        if reason is not None and not session.websocket:
            self._tombstones[session.id] = reason
            while len(self._tombstones) > TOMBSTONES:
                self._tombstones.popitem(last=False)

    def rehome(self, session: Session) -> None:
        """Move a lost WebSocket session to the least loaded worker (its next reset starts afresh)."""
        self._load[session.worker] -= 1
        session.worker = min(range(len(self._load)), key=self._load.__getitem__)
        session.generation = self._generation(session.worker)
        self._load[session.worker] += 1
        session.lost = None

    def worker_died(self, worker: int, generation: int, reason: str) -> None:
        """Every session of that worker is lost: its next call answers ``reason``."""
        for session in list(self._by_id.values()):
            if session.worker == worker and session.generation == generation:
                if session.websocket:
                    session.lost = reason
                else:
                    self.close(session, lost_reason(reason))

    def idle(self) -> list[Session]:
        """Sessions with nothing in flight that have been idle past the timeout."""
        deadline = time.monotonic() - self.idle_timeout_s
        return [s for s in self._by_id.values() if s.last_active < deadline and not s.lock.locked()]
