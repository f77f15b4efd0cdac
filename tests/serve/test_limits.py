"""The worker's one deadline watch: a call past its deadline is ended, and a call that ends in time
never wakes the watching thread (one watch for every call, not one hand-off per call). Run in a
spawned process: the watchdog takes SIGUSR1 and keeps a thread for the life of its process."""

from __future__ import annotations

import multiprocessing

from limits_support import CALLS, watch


def test_one_watch_ends_late_calls_and_sleeps_through_calls_in_time():
    ctx = multiprocessing.get_context("spawn")
    ours, theirs = ctx.Pipe()
    process = ctx.Process(target=watch, args=(theirs,))
    process.start()
    assert ours.poll(60), "the watchdog process did not answer"
    quiet, ended = ours.recv()
    process.join(10)
    assert quiet <= 2, f"{CALLS} calls in time woke the watching thread {quiet} times"
    assert len(ended) == 2
    assert 0.3 <= ended[0] < 3.0 and 5.0 <= ended[1] < 8.0
