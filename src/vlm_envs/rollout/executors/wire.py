"""Messages from an episode worker to its caller: pickles whose large buffers stay in shared memory.

A finished episode carries about 5 MB of training tensors (``pixel_values``) and its images. Sent
through the pipe they would cost the caller a copy; instead they stay in a shared-memory arena
(:mod:`vlm_envs.rollout.executors.arena`) whose descriptor went to the caller once, with the first message
(``SCM_RIGHTS``). The worker makes its training tensors in the arena to begin with
(:meth:`Packer.lend`), and its :class:`Packer` copies every other buffer of at least
:data:`SHARED_MIN_BYTES` there. The caller's :class:`Receiver` unpickles the rest with numpy views
of the arena in place of those buffers (``torch.from_numpy`` over them), and a region goes back to
the worker when the last view of it is gone. When the arena is full, the buffers go to a
shared-memory file of their own; where there is none (not Linux, no memory), in the pickle. Images
arrive undecoded (:class:`DeferredImage`): their pixels are read from the buffer the first time
something looks at them.

One message is ``[4-byte header length][header][pickle]``; the header says where the buffers are:
``None`` (in the pickle), ``("regions", regions, spans)`` (in the arena), ``("file", spans)``
(in a file of their own, when the arena is full) or ``("arena", size)`` (the arena itself); with
the last two, a descriptor follows as one more byte on the socket. Only one thread writes to a connection
(the :class:`Sender`) and one reads from it.
"""

from __future__ import annotations

import io
import os
import pickle
import queue
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import torch
from PIL import Image

from vlm_envs.rollout.executors.arena import ArenaReader, ArenaWriter, file_of, views_of_file

#: Buffers at least this large go to shared memory; smaller ones are cheaper in the pickle.
SHARED_MIN_BYTES = 64 << 10
#: A worker's arena, in address space: room for about 1,500 episodes of 5.4 MB that the caller
#: still holds (a trainer keeps a whole rollout batch); beyond that, a message gets a shared file of
#: its own. Memory is taken as first used and kept for reuse, so the arena holds the most the caller
#: has held of this worker's messages at once, and the next batch writes to pages already there.
ARENA_BYTES = 8 << 30
#: Under a limit on address space (``RLIMIT_AS``), the share of it that the arenas a caller maps
#: (one per worker, beside its own memory) take together at most.
ARENAS_SHARE_OF_ADDRESS_SPACE = 1 / 4
_HEADER_LENGTH_BYTES = 4
#: How long a :class:`Sender` being closed gets to send what is queued (seconds).
SEND_TIMEOUT_S = 5.0


class _BufferPickler(pickle.Pickler):
    """Pickles CPU tensors as numpy arrays and images as their raw bytes, so that the data of both
    is a pickle-5 buffer (which :func:`split` leaves out of band), not ``torch.save`` or bytes."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor and obj.device.type == "cpu" and not obj.requires_grad:
            try:
                return torch.from_numpy, (obj.numpy(),)
            except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16): torch's own way
                return NotImplemented
        if isinstance(obj, Image.Image):
            palette = obj.getpalette() if obj.mode in ("P", "PA") else None
            pixels = pickle.PickleBuffer(obj.tobytes())
            return DeferredImage.of, (obj.mode, obj.size, obj.info, palette, pixels)
        return NotImplemented


def _image(
    mode: str, size: tuple[int, int], info: dict[str, Any], palette: list[int] | None, data: Any
) -> Image.Image:
    image = Image.frombytes(mode, size, data)
    if palette is not None:
        image.putpalette(palette)
    image.info = info
    return image


class DeferredImage(Image.Image):
    """An image whose pixels stay in the message's buffer until something reads them.

    A caller mostly hands a trajectory's images on (the trainer reads ``pixel_values``), so decoding
    every image on arrival would be CPU spent for nothing. Every Pillow operation loads an image
    before reading its pixels (as it does an image opened from a file), and loading decodes it.
    """

    _deferred: tuple[list[int] | None, Any] | None = None  # (palette, raw bytes) until loaded

    @classmethod
    def of(
        cls, mode: str, size: tuple[int, int], info: dict[str, Any], palette: list[int] | None, data: Any
    ) -> DeferredImage:
        image = cls()
        image._mode, image._size, image.info = mode, size, info
        image._deferred = (palette, data)
        return image

    def load(self) -> Any:
        deferred = self._deferred
        if deferred is not None:  # two threads may both decode: equal images, one is kept
            decoded = _image(self.mode, self.size, self.info, *deferred)
            decoded.load()
            self.palette, self.im = decoded.palette, decoded.im
            self._deferred = None
        return super().load()


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


def plain(obj: Any) -> bytes:
    """``obj`` as a message with every buffer in the pickle."""
    return _framed(dumps(obj), None)


def arena_size(wanted: int, arenas: int = 1) -> int:
    """``wanted`` bytes, or less under a limit on this process's address space that ``arenas`` of
    them share."""
    try:
        import resource
    except ImportError:  # not Unix: no such limit
        return wanted
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit == resource.RLIM_INFINITY:
        return wanted
    return min(wanted, max(int(limit * ARENAS_SHARE_OF_ADDRESS_SPACE / arenas), 1 << 20))


class Packer:
    """The worker's side: messages whose large buffers go to its arena, if it has one."""

    def __init__(self, arena_bytes: int = ARENA_BYTES) -> None:
        try:
            self.arena: ArenaWriter | None = ArenaWriter(arena_bytes)
        except (AttributeError, OSError):  # no memfd_create (not Linux), or no memory for it
            self.arena = None

    def greeting(self, obj: Any) -> tuple[bytes, int | None]:
        """The first message, ``obj``, and a descriptor of the arena to send with it (the
        :class:`Sender` closes it once sent)."""
        if self.arena is None:
            return plain(obj), None
        return _framed(dumps(obj), ("arena", self.arena.size)), os.dup(self.arena.fd)

    def pack(self, obj: Any) -> tuple[bytes, int | None]:
        """``obj`` as a message, its large buffers in a new region of the arena, else in a file of
        their own (whose descriptor comes back, to send with the message), else in the pickle."""
        if self.arena is None:
            return plain(obj), None
        body, large = split(obj)
        if not large:
            return _framed(body, None), None
        placed = self.arena.place(large)
        if placed is not None:
            return _framed(body, ("regions", *placed)), None
        shared = file_of(large)
        if shared is not None:
            spans, fd = shared
            return _framed(body, ("file", spans)), fd
        return plain(obj), None

    def lend(self, nbytes: int) -> np.ndarray | None:
        """Room in the arena for a buffer to be made in place (see :meth:`ArenaWriter.lend`)."""
        return None if self.arena is None else self.arena.lend(nbytes)

    def release(self, offset: int) -> None:
        """The caller is done with the region at ``offset``."""
        if self.arena is not None:
            self.arena.release(offset)


def _framed(body: bytes, header: tuple | None) -> bytes:
    head = pickle.dumps(header)
    return len(head).to_bytes(_HEADER_LENGTH_BYTES, "little") + head + body


def _header(message: bytes) -> tuple[Any, memoryview]:
    view = memoryview(message)
    length = int.from_bytes(view[:_HEADER_LENGTH_BYTES], "little")
    end = _HEADER_LENGTH_BYTES + length
    return pickle.loads(view[_HEADER_LENGTH_BYTES:end]), view[end:]


class Receiver:
    """The caller's side: reads :class:`Packer` messages from ``conn`` (one thread only);
    ``release(offset)`` hands a region of the arena back to the worker."""

    def __init__(self, conn: Connection, release: Callable[[int], None]) -> None:
        self.conn = conn
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))
        self.arena: ArenaReader | None = None
        self._release = release

    def recv(self) -> Any:
        """The next object; ``EOFError`` once the peer is gone."""
        header, body = _header(self.conn.recv_bytes())
        if header is None:
            return pickle.loads(body)
        if header[0] == "arena":
            self.arena = ArenaReader(self._descriptor(), header[1], self._release)
            return pickle.loads(body)
        if header[0] == "file":
            return pickle.loads(body, buffers=views_of_file(self._descriptor(), header[1]))
        if self.arena is None:
            raise ValueError("a message with buffers in an arena came before the arena")
        return pickle.loads(body, buffers=self.arena.buffers(header[1:]))

    def _descriptor(self) -> int:
        _, fds, _, _ = socket.recv_fds(self.sock, 1, 1)
        if not fds:
            raise EOFError("the peer ended before sending a message's shared memory")
        return fds[0]

    def close(self) -> None:
        self.sock.close()


class Sender:
    """Writes messages on its own thread, so a peer slow to read never blocks an event loop.

    :meth:`put` takes a message and, if one goes with it, a descriptor that it closes once sent.
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
