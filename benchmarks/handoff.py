"""The hand-off of a finished episode from a worker process to its caller, piece by piece.

For ``--episodes`` 8-turn Sokoban vision episodes (played here, one at a time, Qwen2.5-VL's
processor limits), the CPU per episode of each side of :mod:`vlm_envs.rollout.executors.wire`:

- the worker: training tensors and segment texts made (``Trajectory.prepare``) and the message
  packed, with the tensors made in the shared arena (``Packer.lend``, what workers do) or made
  apart and copied into it;
- the caller: the message unpickled over the arena's views with the images left undecoded (what
  the caller gets), and the same followed by decoding every image (what reading them costs);
- what the slime hook no longer does on the trainer's loop: decode each segment's text (the
  worker sends them).

Each figure is the best of ``--rounds`` passes over the episodes, on an otherwise idle machine: on a
busy one (a pool saturating the other cores) the same work costs about twice as much, mostly from
memory traffic.

Run: ``.venv/bin/python benchmarks/handoff.py`` (about half a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pickle
import time
from collections.abc import Callable

from rollout_overhead import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, answers, sokoban
from vlm_envs.rollout.codec import ChatCodec
from vlm_envs.rollout.episode import EpisodeConfig, run_episode
from vlm_envs.rollout.executors import wire
from vlm_envs.rollout.executors.arena import ArenaReader
from vlm_envs.rollout.offload import INLINE
from vlm_envs.rollout.trajectory import Trajectory
from vlm_envs.testing import ScriptedEngine, build_tiny_processor


def best_ms(trajectories: list[Trajectory], one: Callable[[Trajectory], None], rounds: int) -> float:
    """The best pass's CPU milliseconds per trajectory of ``one``."""
    best = float("inf")
    for _ in range(rounds):
        cpu = time.process_time()
        for traj in trajectories:
            one(traj)
        best = min(best, (time.process_time() - cpu) / len(trajectories))
    return best * 1e3


def decode_texts(codec: ChatCodec, traj: Trajectory) -> None:
    traj._texts = None  # made again, as the hook made them on its loop before the worker sent them
    traj.segment_texts(codec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    codec = ChatCodec(build_tiny_processor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS))
    engine = ScriptedEngine(answers(codec))
    config = EpisodeConfig(max_turns=args.turns, max_new_tokens=32)

    async def play(seed: int) -> Trajectory:
        return await run_episode(sokoban(), engine, codec, seed=seed, config=config, executor=INLINE)

    trajectories = [asyncio.run(play(seed)) for seed in range(args.episodes)]
    packer = wire.Packer(arena_bytes=(8 << 20) * (args.episodes + 2))  # room for every message at once
    if packer.arena is None:
        raise SystemExit("no shared memory here (memfd_create): the workers send everything in the pipe")
    # the messages' regions stay taken while they are read again and again
    reader = ArenaReader(os.dup(packer.arena.fd), packer.arena.size, release=lambda offset: None)

    def worker(lend: bool) -> Callable[[Trajectory], None]:
        def one(traj: Trajectory) -> None:
            traj._train_inputs = traj._texts = None
            traj.prepare(codec, memory=packer.lend if lend else None)
            message, _ = packer.pack(("done", 0, traj))
            traj._train_inputs = None
            header, _ = wire._header(message)
            for offset, _ in header[1]:
                packer.release(offset)

        return one

    messages = []
    for traj in trajectories:
        traj.prepare(codec, memory=packer.lend)
        messages.append(wire._header(packer.pack(("done", 0, traj))[0]))
        traj._train_inputs = None

    def unpickled(index: int) -> Trajectory:
        header, body = messages[index]
        return pickle.loads(body, buffers=reader.buffers(header[1:]))[2]

    def caller(decode: bool) -> Callable[[Trajectory], None]:
        index = {id(traj): i for i, traj in enumerate(trajectories)}

        def one(traj: Trajectory) -> None:
            received = unpickled(index[id(traj)])
            if decode:
                for image in received.images:
                    image.image.load()

        return one

    steps = [
        ("worker: texts and tensors made (these in the arena), message packed", worker(True)),
        ("worker: texts and tensors made (these apart, then copied), message packed", worker(False)),
        ("caller: unpickled, images left undecoded", caller(False)),
        ("caller: unpickled, every image decoded", caller(True)),
        ("slime hook before: segment texts decoded", lambda traj: decode_texts(codec, traj)),
    ]
    rows = [(name, best_ms(trajectories, one, args.rounds)) for name, one in steps]
    images = sum(len({id(p) for p in t.images}) for t in trajectories) / len(trajectories)
    print(
        f"{args.episodes} {args.turns}-turn Sokoban vision episodes ({images:.1f} distinct images each), "
        f"best of {args.rounds} passes, CPU per episode\n"
    )
    print("| step | ms per episode |")
    print("|---|---|")
    for name, ms in rows:
        print(f"| {name} | {ms:.3f} |")


if __name__ == "__main__":
    main()
