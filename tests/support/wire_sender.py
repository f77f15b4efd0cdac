"""A process that sends worker messages, for tests of :mod:`vlm_envs.rollout.wire`."""

from __future__ import annotations

from multiprocessing.connection import Connection

import torch

from vlm_envs.rollout import wire


def send_three_tensors_then_alive(conn: Connection) -> None:
    """Three ``done`` messages with 800 KB tensors full of 0, 1, 2, then an ``alive``."""
    sender = wire.Sender(conn)
    for i in range(3):
        sender.put(*wire.pack(("done", i, torch.full((200_000,), float(i)))))
    sender.put(*wire.pack(("alive", 0, None)))
    sender.close()
