"""The frames between the server and a worker: cut right whatever the pieces, written in order
whatever the socket takes, read whole on the worker's blocking end."""

from __future__ import annotations

import socket
import threading

import pytest

from vlm_envs.serve.pipe import BlockingPipe, Frames, Outbox, frame

PAYLOADS = [b"", b"x", bytes(range(256)) * 40, b"tail"]


@pytest.mark.parametrize("piece", [1, 3, 8, 9, 1000, 1 << 20])
def test_frames_fed_in_pieces_of_any_size_give_back_every_payload_in_order(piece):
    stream = b"".join(frame(p) for p in PAYLOADS)
    frames, got = Frames(), []
    for start in range(0, len(stream), piece):
        got += frames.feed(stream[start : start + piece])
    assert got == PAYLOADS


def test_a_full_socket_queues_writes_in_order_until_flushed():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    outbox = Outbox(ours)
    payloads = [bytes([i % 251]) * 50_000 for i in range(100)]  # 5 MB: far past the socket's buffers
    for payload in payloads:
        outbox.send(frame(payload))
    assert outbox  # the socket did not take it all: the rest waits, nothing blocked
    received: list[bytes] = []
    pipe = BlockingPipe(theirs)
    reader = threading.Thread(target=lambda: received.extend(pipe.recv() for _ in payloads))
    reader.start()
    while outbox:
        outbox.flush()
    reader.join(30)
    assert received == payloads
    ours.close()
    with pytest.raises(EOFError):
        BlockingPipe(theirs).recv()
    theirs.close()


def test_a_broken_socket_is_an_os_error():
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.close()
    with pytest.raises(OSError):
        for _ in range(10):
            Outbox(ours).send(frame(b"x" * 1000))
    ours.close()
