"""Messages from an episode worker to its caller: pickles whose large buffers travel in shared memory.

A finished episode carries about 5 MB of training tensors (``pixel_values``). Sent through the
pipe they cost the caller a copy and fresh pages; here the worker writes every buffer of at least
:data:`SHARED_MIN_BYTES` into an anonymous shared-memory file (``memfd_create``) and passes the
file descriptor over the socket (``SCM_RIGHTS``). The caller maps it once and the arrays it
unpickles are views of that mapping (``torch.from_numpy`` over them): no copy, no name in
``/dev/shm`` to leak or to outgrow, and the memory is freed when the last tensor goes, whoever
dies first. Where ``memfd_create`` is missing (not Linux) or fails, buffers go in the pickle.

One message is ``[4-byte header length][header][pickle]``; the header lists the shared buffers'
``(offset, nbytes)``, and when it is not empty one more byte follows on the socket, carrying the
descriptor. Only one thread writes to a connection (the :class:`Sender`) and one reads from it.
"""

from __future__ import annotations

import io
import mmap
import os
import pickle
import queue
import socket
import threading
from multiprocessing.connection import Connection
from typing import Any

import torch
from PIL import Image

#: Buffers at least this large go to shared memory; smaller ones are cheaper in the pickle.
SHARED_MIN_BYTES = 64 << 10
#: Shared buffers start at multiples of this (a cache line; numpy and torch want aligned data).
ALIGN = 64
_HEADER_LENGTH_BYTES = 4
#: How long a :class:`Sender` being closed gets to send what is queued (seconds).
SEND_TIMEOUT_S = 5.0


class _BufferPickler(pickle.Pickler):
    """Pickles CPU tensors as numpy arrays and images as their raw bytes, so that the data of both
    is a pickle-5 buffer (which :func:`pack` may send out of band), not ``torch.save`` or bytes."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and not obj.requires_grad:
            try:
                return torch.from_numpy, (obj.numpy(),)
            except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16): torch's own way
                return NotImplemented
        if isinstance(obj, Image.Image):
            palette = obj.getpalette() if obj.mode in ("P", "PA") else None
            return _image, (obj.mode, obj.size, obj.info, palette, pickle.PickleBuffer(obj.tobytes()))
        return NotImplemented


def _image(
    mode: str, size: tuple[int, int], info: dict[str, Any], palette: list[int] | None, data: Any
) -> Image.Image:
    image = Image.frombytes(mode, size, data)
    if palette is not None:
        image.putpalette(palette)
    image.info = info
    return image


def dumps(obj: Any, buffer_callback: Any = None) -> bytes:
    """``obj`` pickled (protocol 5, tensors as numpy buffers); buffers inline unless
    ``buffer_callback`` takes them out of band (as :class:`pickle.Pickler`'s)."""
    out = io.BytesIO()
    _BufferPickler(out, protocol=5, buffer_callback=buffer_callback).dump(obj)
    return out.getvalue()


def split(obj: Any) -> tuple[bytes, list[pickle.PickleBuffer]]:
    """``obj`` pickled with its buffers of at least :data:`SHARED_MIN_BYTES` left out, and those
    buffers (``pickle.loads(data, buffers=...)`` puts it back together)."""
    large: list[pickle.PickleBuffer] = []

    def inline(buffer: pickle.PickleBuffer) -> bool:
        if buffer.raw().nbytes < SHARED_MIN_BYTES:
            return True
        large.append(buffer)
        return False

    return dumps(obj, inline), large


def pack(obj: Any) -> tuple[bytes, int | None]:
    """``obj`` as one message, and the descriptor of the shared memory holding its large buffers
    (``None`` if none; whoever called :func:`pack` owns it until it is sent)."""
    if not hasattr(os, "memfd_create"):
        return _framed(dumps(obj), ()), None
    body, large = split(obj)
    if not large:
        return _framed(body, ()), None
    spans, fd = _share(large)
    if fd is None:  # no shared memory to be had: every buffer in the pickle
        return _framed(dumps(obj), ()), None
    return _framed(body, spans), fd


def _framed(body: bytes, spans: tuple[tuple[int, int], ...]) -> bytes:
    header = pickle.dumps(spans)
    return len(header).to_bytes(_HEADER_LENGTH_BYTES, "little") + header + body


def _share(buffers: list[pickle.PickleBuffer]) -> tuple[tuple[tuple[int, int], ...], int | None]:
    """Write ``buffers`` into a new shared-memory file; their ``(offset, nbytes)`` and its fd."""
    spans, end = [], 0
    for buffer in buffers:
        nbytes = buffer.raw().nbytes
        spans.append((end, nbytes))
        end += -(-nbytes // ALIGN) * ALIGN
    try:
        fd = os.memfd_create("vlm-envs-episode", os.MFD_CLOEXEC)
    except OSError:
        return (), None
    try:
        os.ftruncate(fd, end)
        for buffer, (offset, _) in zip(buffers, spans, strict=True):
            view = buffer.raw()
            while view.nbytes:  # pwrite may write less than asked
                written = os.pwrite(fd, view, offset)
                view, offset = view[written:], offset + written
    except OSError:  # out of memory: the buffers go inline instead
        os.close(fd)
        return (), None
    return tuple(spans), fd


def unpack(message: bytes, fd: int | None) -> Any:
    """The object :func:`pack` made ``message`` (and ``fd``, which this closes) from."""
    view = memoryview(message)
    length = int.from_bytes(view[:_HEADER_LENGTH_BYTES], "little")
    spans = pickle.loads(view[_HEADER_LENGTH_BYTES : _HEADER_LENGTH_BYTES + length])
    body = view[_HEADER_LENGTH_BYTES + length :]
    if not spans:
        return pickle.loads(body)
    if fd is None:
        raise ValueError("a message with shared buffers came without its descriptor")
    try:
        size = spans[-1][0] + spans[-1][1]
        # pages are mapped on first read (fault-around maps 16 at a time): about 0.45 ms per 5.4 MB
        # here, paid by whoever reads the tensors, as fresh memory would be by whoever wrote it
        shared = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)
    whole = memoryview(shared)
    return pickle.loads(body, buffers=[whole[offset : offset + n] for offset, n in spans])


def shared_buffers(message: bytes) -> bool:
    """Whether a descriptor follows ``message`` on the connection."""
    length = int.from_bytes(message[:_HEADER_LENGTH_BYTES], "little")
    return bool(pickle.loads(message[_HEADER_LENGTH_BYTES : _HEADER_LENGTH_BYTES + length]))


class Receiver:
    """Reads :func:`pack` messages from ``conn`` (one thread only)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))

    def recv(self) -> Any:
        """The next object; ``EOFError`` once the peer is gone."""
        message = self.conn.recv_bytes()
        fd = None
        if shared_buffers(message):
            _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
            if not fds:
                raise EOFError("the peer ended before sending a message's shared memory")
            fd = fds[0]
        return unpack(message, fd)

    def close(self) -> None:
        self.sock.close()


class Sender:
    """Writes messages on its own thread, so a peer slow to read never blocks an event loop.

    :meth:`put` takes plain bytes (the caller's messages to a worker) or a :func:`pack` result.
    """

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sock: socket.socket | None = None
        self.outbox: queue.SimpleQueue[tuple[bytes, int | None] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True, name="vlm-envs-worker-sender")
        self.thread.start()

    def put(self, data: bytes, fd: int | None = None) -> None:
        self.outbox.put((data, fd))

    def close(self) -> None:
        """Send what is queued, then stop."""
        self.outbox.put(None)
        self.thread.join(timeout=SEND_TIMEOUT_S)

    def _run(self) -> None:
        gone = False
        while (item := self.outbox.get()) is not None:
            data, fd = item
            try:
                if not gone:
                    self.conn.send_bytes(data)
                    if fd is not None:
                        self._send_fd(fd)
            except (OSError, ValueError):  # the peer is gone; its reader reports why
                gone = True
            finally:
                if fd is not None:
                    os.close(fd)
        if self.sock is not None:
            self.sock.close()

    def _send_fd(self, fd: int) -> None:
        if self.sock is None:
            self.sock = socket.socket(fileno=os.dup(self.conn.fileno()))
        socket.send_fds(self.sock, [b"\0"], [fd])
