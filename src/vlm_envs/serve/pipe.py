"""The pipe between the server and one worker process: a socket pair carrying length-prefixed frames.

A frame is :data:`HEADER` (the payload's length, 8 bytes big-endian), then the payload (a pickled
message). The server's end never blocks: :class:`Frames` cuts what a non-blocking read brought into
whole payloads, and :class:`Outbox` holds what the socket did not take yet, both on the server's event
loop. The worker's end (:class:`BlockingPipe`) reads and writes on the thread that runs the calls.
"""

from __future__ import annotations

import collections
import socket
import struct

#: A frame's header: its payload's length in bytes.
HEADER = struct.Struct("!Q")
#: The most bytes one read of a pipe takes.
READ_SIZE = 1 << 18


def frame(payload: bytes) -> bytes:
    """``payload`` as one frame."""
    return HEADER.pack(len(payload)) + payload


class Frames:
    """Whole payloads out of a byte stream fed in pieces of any size."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytearray]:
        """The payloads that ``data`` completes, in order; a partial one waits for the next feed."""
        buffer = self._buffer
        buffer += data
        payloads: list[bytearray] = []
        start, size = 0, len(buffer)
        while size - start >= HEADER.size:
            end = start + HEADER.size + HEADER.unpack_from(buffer, start)[0]
            if end > size:
                break
            payloads.append(buffer[start + HEADER.size : end])
            start = end
        del buffer[:start]
        return payloads


class Outbox:
    """A non-blocking socket's writes, in order: what it does not take at once waits here until
    :meth:`flush` (called when the socket is writable) gets it out."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._waiting: collections.deque[memoryview] = collections.deque()

    def __bool__(self) -> bool:
        """Whether anything waits for the socket."""
        return bool(self._waiting)

    def send(self, data: bytes) -> None:
        """Write ``data`` after anything waiting; ``OSError`` if the socket is broken."""
        if not self._waiting:
            try:
                sent = self._sock.send(data)
            except BlockingIOError:
                sent = 0
            if sent == len(data):
                return
            data = data[sent:]
        self._waiting.append(memoryview(data))

    def flush(self) -> None:
        """Write what waits until the socket takes no more; ``OSError`` if it is broken."""
        while self._waiting:
            head = self._waiting[0]
            try:
                sent = self._sock.send(head)
            except BlockingIOError:
                return
            if sent < len(head):
                self._waiting[0] = head[sent:]
                return
            self._waiting.popleft()


class BlockingPipe:
    """The worker's end: one payload at a time, each read or write waiting as long as it takes. A read
    takes whatever has arrived, so payloads sent together cost one system call."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._frames = Frames()
        self._arrived: collections.deque[bytearray] = collections.deque()

    def recv(self) -> bytearray:
        """The next payload; ``EOFError`` once the other end has closed."""
        while not self._arrived:
            data = self._sock.recv(READ_SIZE)
            if not data:
                raise EOFError("the other end closed the pipe")
            self._arrived.extend(self._frames.feed(data))
        return self._arrived.popleft()

    def send(self, payload: bytes) -> None:
        """Write ``payload`` as one frame; ``OSError`` if the other end is gone."""
        self._sock.sendall(frame(payload))
