"""A process that sends worker messages, for tests of :mod:`vlm_envs.rollout.executors.wire`."""

from __future__ import annotations

import pickle
from multiprocessing.connection import Connection

import torch

from vlm_envs.rollout.executors import wire


def send_tensors_until_stopped(conn: Connection, arena_bytes: int) -> None:
    """``ready`` with its arena, then a ``done`` with a 400 KB tensor full of ``i`` for every
    ``("send", i)`` received, releasing the regions the other side frees; ``stop`` ends it."""
    sender = wire.Sender(conn)
    packer = wire.Packer(arena_bytes)
    sender.put(*packer.greeting(("ready", 0, None)))
    while True:
        kind, number, _ = pickle.loads(conn.recv_bytes())
        if kind == "send":
            sender.put(*packer.pack(("done", number, torch.full((100_000,), float(number)))))
        elif kind == "free":
            packer.release(number)
            sender.put(wire.plain(("freed", number, packer.arena.free_bytes)))
        else:
            break
    sender.close()
