"""Worker messages: large buffers in a shared arena the caller reads in place and hands back."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image
from wire_sender import send_tensors_until_stopped

from vlm_envs.rollout.executors import wire
from vlm_envs.rollout.executors.arena import ArenaReader, ArenaWriter

ARENA = 4 << 20


@pytest.fixture
def worker():
    """A real spawned process speaking the protocol, and the caller's receiver of its messages."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=send_tensors_until_stopped, args=(child, ARENA))
    process.start()
    child.close()
    sender = wire.Sender(parent)
    receiver = wire.Receiver(parent, release=lambda offset: sender.put(pickle.dumps(("free", offset, None))))
    assert receiver.recv() == ("ready", 0, None) and receiver.arena is not None
    yield sender, receiver
    sender.put(pickle.dumps(("stop", 0, None)))
    process.join(timeout=30)
    receiver.close()
    sender.close()
    assert process.exitcode == 0


def in_arena(receiver, tensor):
    start = np.frombuffer(receiver.arena._map, dtype=np.uint8).ctypes.data
    return start <= tensor.data_ptr() < start + ARENA


def ask(sender, receiver, number):
    sender.put(pickle.dumps(("send", number, None)))
    return receiver.recv()


def test_tensors_arrive_as_writable_views_of_the_arena(worker):
    sender, receiver = worker
    kind, number, tensor = ask(sender, receiver, 3)
    assert (kind, number) == ("done", 3) and torch.equal(tensor, torch.full((100_000,), 3.0))
    assert in_arena(receiver, tensor)  # a view of the arena, not a copy
    tensor[0] = -1.0  # the caller's to use like any tensor until it drops it
    assert tensor[0] == -1.0


def test_a_region_goes_back_once_its_last_view_is_dropped_and_is_reused(worker):
    sender, receiver = worker
    _, _, first = ask(sender, receiver, 1)
    view = first[10:20]  # a view of the view keeps the region too
    del first
    gc.collect()
    _, _, second = ask(sender, receiver, 2)  # the first region is still held: a new one
    assert torch.equal(view, torch.full((10,), 1.0)) and torch.equal(second[:5], torch.full((5,), 2.0))
    del view, second
    freed = [receiver.recv() for _ in range(2)]
    assert [kind for kind, _, _ in freed] == ["freed", "freed"] and freed[-1][2] == ARENA
    _, _, third = ask(sender, receiver, 4)  # everything free again: the same pages serve
    assert torch.equal(third, torch.full((100_000,), 4.0))


def test_a_full_arena_sends_buffers_in_files_of_their_own(worker):
    sender, receiver = worker
    held = [ask(sender, receiver, i)[2] for i in range(12)]  # 12 x 400 KB > 4 MB
    assert all(torch.equal(t, torch.full((100_000,), float(i))) for i, t in enumerate(held))
    placed = [in_arena(receiver, t) for t in held]
    assert placed[0] and not placed[-1] and placed == sorted(placed, reverse=True)


def test_the_default_arena_takes_memory_only_as_it_is_used_and_keeps_it():
    packer = wire.Packer()  # 8 GB of address space, so that a trainer's whole rollout batch fits
    assert packer.arena.size == wire.ARENA_BYTES >= 8 << 30
    assert os.fstat(packer.arena.fd).st_blocks == 0  # nothing taken yet
    array = packer.lend(10 << 20)
    array[::4096] = 1  # one byte per page: every page taken
    taken = os.fstat(packer.arena.fd).st_blocks * 512
    assert 10 << 20 <= taken < 11 << 20
    del array
    gc.collect()
    assert packer.arena.free_bytes == packer.arena.size  # the region went back ...
    again = packer.lend(10 << 20)
    assert os.fstat(packer.arena.fd).st_blocks * 512 == taken  # ... its pages did not
    assert again[0] == 1 and again[4096] == 1  # the next episode writes to the same pages


def test_without_shared_memory_every_buffer_goes_in_the_message(monkeypatch):
    def no_memory(*_):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "memfd_create", no_memory)
    packer = wire.Packer()
    message, fd = packer.pack(torch.ones(100_000))
    assert packer.arena is None and fd is None and len(message) > 400_000
    header, body = wire._header(message)
    assert header is None and torch.equal(pickle.loads(body), torch.ones(100_000))


@pytest.mark.parametrize("mode", ["RGB", "L", "RGBA", "P"])
def test_images_keep_mode_size_palette_info_and_pixels(mode):
    image = Image.effect_noise((400, 300), 60).convert(mode)
    image.info["source"] = "env"
    body, large = wire.split([image])
    (again,) = pickle.loads(body, buffers=[b.raw() for b in large])
    assert (again.mode, again.size, again.info) == (image.mode, image.size, image.info)
    assert again.tobytes() == image.tobytes() and again.getpalette() == image.getpalette()
    assert len(body) < 2000  # the pixels (120 KB and more) travelled out of band


def test_an_image_is_decoded_when_first_read_not_when_it_arrives():
    image = Image.effect_noise((64, 48), 60).convert("RGB")
    body, large = wire.split(image)
    again = pickle.loads(body, buffers=[b.raw() for b in large])
    assert again._deferred is not None and again._im is None  # nothing decoded yet
    assert again.getpixel((5, 7)) == image.getpixel((5, 7)) and again._deferred is None
    deferred = pickle.loads(body, buffers=[b.raw() for b in large])
    assert np.array_equal(np.asarray(deferred), np.asarray(image))  # numpy reads it through load()
    for read in (lambda im: im.copy(), lambda im: im.resize((8, 6)), lambda im: im.convert("L")):
        fresh = pickle.loads(body, buffers=[b.raw() for b in large])
        assert read(fresh).tobytes() == read(image).tobytes()
    plain_again = pickle.loads(pickle.dumps(pickle.loads(body, buffers=[b.raw() for b in large])))
    assert plain_again.tobytes() == image.tobytes()  # plain pickle of a deferred image still works


def test_the_allocator_coalesces_freed_regions():
    arena = ArenaWriter(1 << 20)
    buffers = [pickle.PickleBuffer(bytearray(100_000)) for _ in range(3)]
    offsets = [arena.place([b])[0][0][0] for b in buffers]
    assert offsets == sorted(set(offsets))  # distinct, in order
    assert arena.place([pickle.PickleBuffer(bytearray(800_000))]) is None  # no room left
    for offset in (offsets[1], offsets[0], offsets[2]):
        arena.release(offset)
    assert arena.free_bytes == 1 << 20
    assert arena.place([pickle.PickleBuffer(bytearray(1 << 20))]) is not None  # one block again


def read_back(arena, placed, body):
    """What the caller of ``arena``'s worker reads from a message placed as ``placed``."""
    reader = ArenaReader(os.dup(arena.fd), arena.size, release=arena.release)
    return pickle.loads(body, buffers=reader.buffers(placed))


def test_a_tensor_made_in_a_lent_region_is_sent_without_a_copy_and_freed_by_the_caller():
    arena = ArenaWriter(1 << 20)
    memory = arena.lend(400_000)
    tensor = torch.from_numpy(memory.view(np.float32).reshape(1000, 100))
    tensor.fill_(2.5)
    image = Image.effect_noise((200, 150), 60).convert("RGB")  # 90 KB: copied into a region of its own
    body, large = wire.split({"pixel_values": tensor, "image": image})
    placed = arena.place(large)
    regions, _ = placed
    assert regions[0] == (0, 400_000) and len(regions) == 2  # the lent region itself, then the copy
    del tensor, memory, large
    gc.collect()
    assert arena.free_bytes == (1 << 20) - 400_000 - 90_048  # the worker no longer frees what it sent
    got = read_back(arena, placed, body)
    assert torch.equal(got["pixel_values"], torch.full((1000, 100), 2.5))
    assert got["image"].tobytes() == image.tobytes()
    del got
    gc.collect()
    assert arena.free_bytes == 1 << 20  # the caller's last views gone: both regions are back


def test_a_lent_region_never_sent_goes_back_with_its_last_view():
    arena = ArenaWriter(1 << 20)
    memory = arena.lend(100_000)
    rows = torch.from_numpy(memory.view(np.float32))[10:20]  # a view of a view keeps the region
    del memory
    gc.collect()
    assert arena.free_bytes == (1 << 20) - 100_032
    del rows
    gc.collect()
    assert arena.free_bytes == 1 << 20
    assert arena.lend(2 << 20) is None  # no room: the caller makes its tensor elsewhere


LIMITED = """
import asyncio, functools, resource
resource.setrlimit(resource.RLIMIT_AS, (24 << 30, resource.RLIM_INFINITY))  # the workers inherit it
from vlm_envs.rollout.episode import EpisodeConfig
from vlm_envs.rollout.executors.workers import EpisodeJob, EpisodeWorkers
from vlm_envs.testing import ScriptedEngine, build_tiny_processor

async def main(pool):
    config = EpisodeConfig(max_turns=2)
    job = EpisodeJob("sokoban", {"grid_size": (6, 6), "num_boxes": 1}, seed=0, config=config)
    return await asyncio.gather(*(pool.run(job) for _ in range(4)))

if __name__ == "__main__":
    with EpisodeWorkers(4, build_tiny_processor(), functools.partial(ScriptedEngine, [[1, 2]])) as pool:
        print(pool._spec.arena_bytes, *sorted({t.status.value for t in asyncio.run(main(pool))}))
"""


def test_under_a_limit_on_address_space_the_workers_arenas_share_a_quarter_of_it(tmp_path):
    """Workers inherit their caller's ``RLIMIT_AS`` and the caller maps every worker's arena: at
    the full size four would not fit in 24 GB, and the episodes of the workers whose arena the
    caller could not map would fail."""
    script = tmp_path / "limited.py"
    script.write_text(LIMITED)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    size, *statuses = out.stdout.split()
    assert int(size) == (24 << 30) // 4 // 4 < wire.ARENA_BYTES
    assert set(statuses) <= {"completed", "truncated"}, statuses
