"""Worker messages: large buffers travel in shared memory, everything else in the pickle."""

from __future__ import annotations

import multiprocessing
import os

import pytest
import torch
from PIL import Image
from wire_sender import send_three_tensors_then_alive

from vlm_envs.rollout import wire


def test_large_tensors_arrive_as_views_of_shared_memory_and_small_ones_inline():
    big = torch.arange(300_000, dtype=torch.float32).reshape(1000, 300)
    small = torch.tensor([[1, 8, 8]], dtype=torch.long)
    message, fd = wire.pack({"pixel_values": big, "grid": small, "note": "x"})
    assert fd is not None and len(message) < 10_000  # the 1.2 MB stayed out of the message
    again = wire.unpack(message, fd)
    assert torch.equal(again["pixel_values"], big) and torch.equal(again["grid"], small)
    assert again["note"] == "x"
    assert not again["pixel_values"].numpy().flags.owndata  # a view, not a copy
    again["pixel_values"][0, 0] = -1.0  # writable, like any tensor the trainer gets
    assert again["pixel_values"][0, 0] == -1.0


def test_a_message_without_large_buffers_carries_no_descriptor():
    message, fd = wire.pack(("ready", 0, torch.zeros(4)))
    assert fd is None
    kind, _, tensor = wire.unpack(message, None)
    assert kind == "ready" and torch.equal(tensor, torch.zeros(4))


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA", "P"])
def test_images_keep_mode_size_palette_info_and_pixels(mode):
    image = Image.effect_noise((200, 190), 60).convert(mode)
    image.info["source"] = "env"
    message, fd = wire.pack([image])
    (again,) = wire.unpack(message, fd)
    assert (again.mode, again.size, again.info) == (image.mode, image.size, image.info)
    assert again.tobytes() == image.tobytes() and again.getpalette() == image.getpalette()


def test_without_shared_memory_every_buffer_goes_inline(monkeypatch):
    def no_memory(*_):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "memfd_create", no_memory)
    big = torch.ones(100_000)
    message, fd = wire.pack(big)
    assert fd is None and len(message) > big.numel() * 4
    assert torch.equal(wire.unpack(message, None), big)


def test_a_real_process_sends_descriptors_in_order_with_its_messages():
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=send_three_tensors_then_alive, args=(child,))
    process.start()
    child.close()
    receiver = wire.Receiver(parent)
    try:
        got = [receiver.recv() for _ in range(4)]
    finally:
        receiver.close()
        process.join(timeout=30)
    assert [(kind, i) for kind, i, _ in got] == [("done", 0), ("done", 1), ("done", 2), ("alive", 0)]
    for i in range(3):
        assert torch.equal(got[i][2], torch.full((200_000,), float(i)))
    assert process.exitcode == 0
