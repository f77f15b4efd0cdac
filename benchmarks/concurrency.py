"""Many episodes at once on one event loop, and what their caller pays for them.

:func:`drive` runs the episodes, hands each finished trajectory to a "trainer" thread that reads and
frees its training tensors, and returns the run's wall time, the caller's CPU (its loop's share
apart), the trainer's CPU, how often the caller's threads were woken and the loop's longest stall
(:class:`StallMeter`). :func:`wake_cpu_us` says what this machine charges per wake-up, so that the
CPU figures can be read on any machine. ``rollout_overhead.py`` and ``scaling.py`` use it.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import queue
import resource
import selectors
import threading
import time
from collections.abc import Awaitable, Callable

from vlm_envs.rollout.trajectory import Status, Trajectory

#: Floats per 4 KiB memory page: reading one per page maps every page of a tensor.
PAGE_FLOATS = 4096 // 4


class StallMeter(selectors.DefaultSelector):
    """An event loop's selector that times each stretch the loop spends between two looks at its
    I/O (running the callbacks that were ready): the longest one is the loop's longest stall.

    A heartbeat task would measure about the same, but here each of its wake-ups costs the caller
    40 to 150 us of CPU (``wake_cpu_us``): at 10 ms, more than the executor's own work per episode.
    """

    def __init__(self) -> None:
        super().__init__()
        self.longest = 0.0
        self._woke: float | None = None  # when the loop last came back from select, while metering

    def start(self) -> None:
        self.longest, self._woke = 0.0, time.perf_counter()

    def stop(self) -> float:
        """The longest stall since :meth:`start`, in seconds (the stretch running now included)."""
        if self._woke is not None:
            self.longest = max(self.longest, time.perf_counter() - self._woke)
        self._woke = None
        return self.longest

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if self._woke is not None:
            self.longest = max(self.longest, time.perf_counter() - self._woke)
        ready = super().select(timeout)
        if self._woke is not None:
            self._woke = time.perf_counter()
        return ready


def wake_cpu_us(sleep_s: float = 0.01, wakes: int = 100) -> float:
    """CPU (us) that this machine charges a thread per wake-up from sleeping ``sleep_s``."""
    cpu = time.thread_time()
    for _ in range(wakes):
        time.sleep(sleep_s)
    return (time.thread_time() - cpu) / wakes * 1e6


def switches(skip: set[int]) -> int | None:
    """Voluntary context switches (a thread that waited and was woken) of this process's live
    threads whose native ids are not in ``skip``; ``None`` without ``/proc``."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        if int(tid) in skip:
            continue
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                total += int(f.read().split("\nvoluntary_ctxt_switches:", 1)[1].split()[0])
        except (OSError, IndexError):  # a thread that just ended
            continue
    return total


def drive(play: Callable[[int], Awaitable[Trajectory]], episodes: int, batch: int = 1) -> dict[str, float]:
    """Run ``episodes`` at once on a new event loop whose stalls a :class:`StallMeter` times;
    ``play`` gives each finished trajectory with its training tensors made (off the loop, as the
    slime hook has them made).

    Each trajectory then goes to a "trainer" thread that keeps them until it has ``batch`` of them
    (slime trains on a whole rollout batch), then reads one float per page of each one's
    ``pixel_values`` and drops them, as a trainer would use and free them. ``caller_cpu`` is the
    CPU of this process over the run without that thread's, which is ``trainer_cpu``; ``loop_cpu``
    is the part of it spent on this loop's thread (the rest: a pool's reader and writer threads,
    Ray's driver threads); ``wakes`` counts the times the caller's threads (not the trainer's)
    waited and were woken (``nan`` without ``/proc``).
    """
    meter = StallMeter()
    with asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(meter)) as runner:
        return runner.run(_drive(play, episodes, batch, meter))


async def _drive(
    play: Callable[[int], Awaitable[Trajectory]], episodes: int, batch: int, meter: StallMeter
) -> dict[str, float]:
    gc.collect()
    gc.freeze()  # long-lived objects (model code, processor) out of the collector's way, as a trainer would
    trainer = _Trainer(batch)
    turns = 0

    async def one(seed: int) -> None:
        nonlocal turns
        traj = await play(seed)
        if traj.status not in (Status.COMPLETED, Status.TRUNCATED):
            raise RuntimeError(f"episode {seed} ended {traj.status.value}: {traj.error}")
        if traj._train_inputs is None:  # made by now, off this loop: the run must have paid for them
            raise RuntimeError(f"episode {seed} came back without its training tensors")
        turns += len(traj.turns)
        trainer.take(traj)

    skip = {trainer.thread.native_id or 0}
    wakes = switches(skip)
    wall, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    meter.start()
    try:
        await asyncio.gather(*(one(seed) for seed in range(episodes)))
    finally:  # a failed episode must not leave the trainer thread holding the process open
        stall = meter.stop()
        trainer_cpu = trainer.finish()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    loop_cpu = time.thread_time() - loop_cpu
    after = switches(skip)
    gc.unfreeze()
    return {
        "turns": turns,
        "wall": wall,
        "max_stall_ms": stall * 1e3,
        "caller_cpu": cpu - trainer_cpu,
        "loop_cpu": loop_cpu,
        "trainer_cpu": trainer_cpu,
        "wakes": float("nan") if wakes is None or after is None else after - wakes,
    }


class _Trainer:
    """A thread that reads and frees finished trajectories ``batch`` at a time, timing itself."""

    def __init__(self, batch: int = 1) -> None:
        self.batch = batch
        self.inbox: queue.SimpleQueue[Trajectory | None] = queue.SimpleQueue()
        self.cpu = 0.0
        self.thread = threading.Thread(target=self._run, name="bench-trainer")
        self.thread.start()

    def take(self, traj: Trajectory) -> None:
        self.inbox.put(traj)

    def finish(self) -> float:
        """Wait for the queued trajectories; the thread's CPU seconds."""
        self.inbox.put(None)
        self.thread.join()
        return self.cpu

    def _run(self) -> None:
        start = time.thread_time()
        held: list[Trajectory] = []
        while (traj := self.inbox.get()) is not None:
            held.append(traj)
            del traj  # the batch holds it, nothing else
            if len(held) == self.batch:
                self._train(held)
        self._train(held)
        self.cpu = time.thread_time() - start

    @staticmethod
    def _train(held: list[Trajectory]) -> None:
        for traj in held:
            pixels = traj.train_inputs()["pixel_values"].numpy().reshape(-1)
            float(pixels[::PAGE_FLOATS].sum())
        held.clear()


def cpu_seconds() -> float:
    """CPU time of this process and of its live children (the workers), read from /proc."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    ticks = os.sysconf("SC_CLK_TCK")
    children = 0.0
    for child in multiprocessing.active_children():
        with open(f"/proc/{child.pid}/stat") as f:  # fields 14, 15: utime, stime (after the name)
            fields = f.read().rsplit(")", 1)[1].split()
        children += (int(fields[11]) + int(fields[12])) / ticks
    return own.ru_utime + own.ru_stime + children
