"""A shared-memory arena between an episode worker and its caller, mapped once by each.

The worker carves each message's large buffers out of it (:class:`ArenaWriter`), or makes a
buffer in it to begin with (:meth:`ArenaWriter.lend`: the training tensors, written once, where the
caller reads them); the caller reads them in place as numpy views and, once the last view of a
region is gone, hands the region back (:class:`ArenaReader`), so the same pages serve episode after
episode. A fresh mapping per message would cost the caller its page faults, an ``munmap`` and the
freeing of every page (about 1.5 ms per 5.4 MB episode, measured here); reused pages cost nothing.
The arena's pages are taken as first used (regions are first fit, from the start) and kept, so it
grows to what the caller holds at most (a trainer keeping a whole rollout batch) and the next batch
reuses it. When the caller holds more than the arena, a message's buffers go to a shared-memory
file of their own (:func:`file_of`), freed with the caller's last view of it. Both are anonymous
``memfd`` files: they go away with the last process holding them, whoever dies first.
"""

from __future__ import annotations

import bisect
import mmap
import os
import pickle
import threading
import weakref
from collections.abc import Callable, Sequence

import numpy as np

#: Regions start at multiples of this (a cache line; numpy and torch want aligned data).
ALIGN = 64

#: A placed message: its regions' ``(offset, length)``, and each buffer's ``(region, start, nbytes)``.
Placed = tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int, int], ...]]


def _aligned(nbytes: int) -> int:
    return max(-(-nbytes // ALIGN) * ALIGN, ALIGN)


def _layout(buffers: Sequence[pickle.PickleBuffer]) -> tuple[tuple[tuple[int, int], ...], int]:
    """Each buffer's ``(offset, nbytes)`` when laid out one after the other, aligned; the length."""
    spans, end = [], 0
    for buffer in buffers:
        nbytes = buffer.raw().nbytes
        spans.append((end, nbytes))
        end += _aligned(nbytes)
    return tuple(spans), max(end, ALIGN)


def file_of(buffers: Sequence[pickle.PickleBuffer]) -> tuple[tuple[tuple[int, int], ...], int] | None:
    """A new shared-memory file holding ``buffers``: their spans in it and its descriptor (the
    caller's to send and close); ``None`` where no such file can be had."""
    spans, length = _layout(buffers)
    try:
        fd = os.memfd_create("vlm-envs-message", os.MFD_CLOEXEC)
    except (AttributeError, OSError):  # not Linux, or no memory
        return None
    try:
        os.ftruncate(fd, length)
        for buffer, (offset, _) in zip(buffers, spans, strict=True):
            view = buffer.raw()
            while view.nbytes:  # pwrite may write less than asked
                written = os.pwrite(fd, view, offset)
                view, offset = view[written:], offset + written
    except OSError:
        os.close(fd)
        return None
    return spans, fd


def views_of_file(fd: int, spans: Sequence[tuple[int, int]]) -> list[memoryview]:
    """Views of the buffers in the file :func:`file_of` made (``fd`` is closed here); the file is
    freed with the last of them."""
    try:
        whole = memoryview(mmap.mmap(fd, spans[-1][0] + _aligned(spans[-1][1]), flags=mmap.MAP_SHARED))
    finally:
        os.close(fd)
    return [whole[start : start + nbytes] for start, nbytes in spans]


class ArenaWriter:
    """The worker's side: ``size`` bytes of shared memory and a first-fit allocator over them."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.fd = os.memfd_create("vlm-envs-arena", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self._view = memoryview(mmap.mmap(self.fd, size, flags=mmap.MAP_SHARED))
        except OSError:
            os.close(self.fd)
            raise
        self._free_starts = [0]  # sorted; with _free_sizes, the free blocks
        self._free_sizes = [size]
        self._taken: dict[int, int] = {}  # region offset -> its length
        self._lent: dict[int, weakref.finalize] = {}  # lent regions no message has taken yet
        self._address = np.frombuffer(self._view, dtype=np.uint8).ctypes.data
        self._lock = threading.Lock()  # regions are taken on one thread, released on another

    def lend(self, nbytes: int) -> np.ndarray | None:
        """A new region as a writable byte array, for a buffer made in place (:meth:`place` then
        sends it without a copy); ``None`` when no free block is large enough. The region is freed
        when the array and every view of it are gone, unless a message took it first."""
        with self._lock:
            offset = self._take(_aligned(nbytes))
            if offset is None:
                return None
            array = np.frombuffer(self._view[offset : offset + nbytes], dtype=np.uint8)
            # numpy views of an array over a buffer keep that array (not the buffer) as their base
            self._lent[offset] = weakref.finalize(array, self.release, offset)
        return array

    def place(self, buffers: Sequence[pickle.PickleBuffer]) -> Placed | None:
        """Put ``buffers`` in the arena for one message: those made in a lent region stay there (the
        region is the caller's to free from now on), the others are copied into one new region;
        ``None`` when no free block is large enough for them."""
        regions: list[tuple[int, int]] = []
        spans: list[tuple[int, int, int] | None] = [None] * len(buffers)
        copied = []
        for i, buffer in enumerate(buffers):
            lent = self._lent_region(buffer)
            if lent is None:
                copied.append(i)
                continue
            if lent not in regions:
                regions.append(lent)
            spans[i] = (regions.index(lent), 0, buffer.raw().nbytes)
        if copied:
            layout, length = _layout([buffers[i] for i in copied])
            with self._lock:
                offset = self._take(length)
            if offset is None:
                return None
            for i, (start, nbytes) in zip(copied, layout, strict=True):
                self._view[offset + start : offset + start + nbytes] = buffers[i].raw()
                spans[i] = (len(regions), start, nbytes)
            regions.append((offset, length))
        with self._lock:
            for offset, _ in regions:
                lent = self._lent.pop(offset, None)
                if lent is not None:
                    lent.detach()
        return tuple(regions), tuple(spans)  # type: ignore[arg-type]

    def _lent_region(self, buffer: pickle.PickleBuffer) -> tuple[int, int] | None:
        """The lent region ``buffer`` starts, as ``(offset, length)``, if it starts one."""
        view = buffer.raw()
        offset = np.frombuffer(view, dtype=np.uint8).ctypes.data - self._address if view.nbytes else -1
        if offset not in self._lent:
            return None
        length = self._taken[offset]
        return (offset, length) if view.nbytes <= length else None

    def release(self, offset: int) -> None:
        """Free the region at ``offset`` (a region not taken is ignored)."""
        with self._lock:
            self._lent.pop(offset, None)
            self._release(offset)

    @property
    def free_bytes(self) -> int:
        with self._lock:
            return sum(self._free_sizes)

    def _release(self, offset: int) -> None:
        length = self._taken.pop(offset, None)
        if length is None:
            return
        i = bisect.bisect(self._free_starts, offset)
        self._free_starts.insert(i, offset)
        self._free_sizes.insert(i, length)
        if i + 1 < len(self._free_starts) and offset + length == self._free_starts[i + 1]:
            self._free_sizes[i] += self._free_sizes.pop(i + 1)
            self._free_starts.pop(i + 1)
        if i > 0 and self._free_starts[i - 1] + self._free_sizes[i - 1] == offset:
            self._free_sizes[i - 1] += self._free_sizes.pop(i)
            self._free_starts.pop(i)

    def _take(self, length: int) -> int | None:
        for i, size in enumerate(self._free_sizes):
            if size >= length:
                offset = self._free_starts[i]
                if size == length:
                    del self._free_starts[i], self._free_sizes[i]
                else:
                    self._free_starts[i] += length
                    self._free_sizes[i] -= length
                self._taken[offset] = length
                return offset
        return None


class ArenaReader:
    """The caller's side: the arena mapped once; ``release(offset)`` is called (from whichever
    thread drops the last view) when a region's views are all gone."""

    def __init__(self, fd: int, size: int, release: Callable[[int], None]) -> None:
        try:
            self._map = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
        self._release = release

    def buffers(self, placed: Placed) -> list[memoryview]:
        """Views of the buffers of a message :meth:`ArenaWriter.place` placed; each region is
        released once no view of it is left."""
        regions, spans = placed
        views = [self._region(offset, length) for offset, length in regions]
        return [views[region][start : start + nbytes] for region, start, nbytes in spans]

    def _region(self, offset: int, length: int) -> memoryview:
        region = np.frombuffer(self._map, dtype=np.uint8, count=length, offset=offset)
        weakref.finalize(region, self._release, offset).atexit = False  # no worker to tell at exit
        return memoryview(region)
