"""A served episode outlives its server: ``RemoteEnv`` given two real ``vlm-envs serve`` processes keeps
each episode's snapshot, and when one server is SIGKILLed (its whole process group, workers included)
with episodes in flight on it, restores them on the other and plays on. Every episode equals the same
episode in process (text, image bytes, rewards, ends, metrics but the restore count), and the step after
the loss counts one restore."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from vlm_envs import build_env
from vlm_envs.imaging import lossless_png
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.remote_failover import RESTORES_METRIC, KeptSnapshot, restore_order, session_gone
from vlm_envs.remote_wire import MalformedReply
from vlm_envs.serve.config import ServeConfig

sys.path.insert(0, str(Path(__file__).parent / "serve"))
from serve_support import ServerThread, wait_for

#: Envs whose random episodes (seeds below) last past the kill; two episodes each.
ENVS = ("sokoban", "sliding_puzzle", "jigsaw", "fog_maze")
SEEDS = (5, 6)
TURNS = 7
#: The turn every episode has played when the server is killed.
KILL_AFTER = 2


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def served(log: Path) -> Iterator[tuple[str, subprocess.Popen]]:
    """``vlm-envs serve ENVS`` (one worker) in a process group of its own; its URL once it answers."""
    port = free_port()
    command = [sys.executable, "-m", "vlm_envs.cli", "serve", *ENVS, "--port", str(port), "--workers", "1"]
    with log.open("w") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(url + "/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        yield url, server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)


def view(obs: Any, done: bool = False, info: Any = None, reward: float | None = None) -> dict[str, Any]:
    """What the in-process and the served episode must agree on, after a reset or a step."""
    turn = {"text": obs.text, "role": obs.role, "png": [lossless_png(i) for i in obs.images]}
    if info is not None:
        metrics = {k: v for k, v in info.metrics.items() if k != RESTORES_METRIC}
        turn |= {"reward": info.reward, "done": done, "metrics": metrics, "info": info.info}
        turn |= {"episode_reward": reward}
    return turn


def in_process(name: str, seed: int) -> tuple[list[str], list[dict[str, Any]]]:
    env = build_env(name)
    obs, _ = env.reset(seed)
    rng, replies, turns = random.Random(seed), [], [view(obs)]
    for _ in range(TURNS):
        replies.append(env.random_response(rng))
        obs, done, info = env.step(replies[-1])
        turns.append(view(obs, done, info, env.episode_reward()))
        if done:
            break
    return replies, turns


def test_episodes_outlive_a_sigkilled_server(tmp_path):
    expected = {(name, seed): in_process(name, seed) for name in ENVS for seed in SEEDS}
    assert all(len(replies) > KILL_AFTER + 1 for replies, _ in expected.values())
    with served(tmp_path / "a.log") as (url_a, server_a), served(tmp_path / "b.log") as (url_b, _):
        reached = threading.Barrier(len(expected) + 1, timeout=120)
        results: dict[tuple[str, int], Any] = {}

        def play(name: str, seed: int) -> None:
            env = RemoteEnv([url_a, url_b], name, timeout_s=30)
            try:
                obs, _ = env.reset(seed)
                first_url, turns, restores = env.url, [view(obs)], []
                for turn, reply in enumerate(expected[name, seed][0], 1):
                    obs, done, info = env.step(reply)
                    turns.append(view(obs, done, info, env.episode_reward()))
                    restores.append(info.metrics.get(RESTORES_METRIC, 0))
                    if turn == KILL_AFTER:
                        reached.wait()
                results[name, seed] = (first_url, env.url, turns, restores)
            except BaseException as err:  # the main thread reports it
                results[name, seed] = err
                reached.abort()
            finally:
                env.close()

        threads = [threading.Thread(target=play, args=key, daemon=True) for key in expected]
        for thread in threads:
            thread.start()
        reached.wait()  # every episode is past turn KILL_AFTER; their next steps go out as it dies
        os.killpg(server_a.pid, signal.SIGKILL)
        for thread in threads:
            thread.join(120)
        assert server_a.wait(10) == -signal.SIGKILL
    on_a = 0
    for key, (_, turns) in expected.items():
        result = results[key]
        assert not isinstance(result, BaseException), f"{key}: {result!r}"
        first_url, last_url, got, restores = result
        assert got == turns, key  # text, image bytes, rewards, ends, metrics and info
        if first_url == url_a:  # lost with server A, restored once on B, on a step after the kill
            on_a += 1
            assert last_url == url_b and sum(restores) == 1 and not any(restores[:KILL_AFTER]), key
        else:
            assert last_url == url_b and set(restores) == {0}, key
    assert on_a == len(expected) // 2  # the URLs are taken in turn


def test_an_episode_lost_with_its_worker_is_restored_and_counted():
    """A server whose worker died answers the session's next call ``session lost``: the episode goes on
    on the other server, and the step equals the in-process one. Where the episode stands after the
    restore is the restoring reply's, and equals the in-process episode's."""
    replies, turns = in_process("sokoban", 5)
    local = build_env("sokoban")
    local.reset(5)
    stood = []
    for reply in replies[:2]:
        local.step(reply)
        stood.append((local.state_key(), local.state_text(), local.distance_to_goal()))
    with (
        ServerThread(ServeConfig(envs=("sokoban",), workers=1)) as a,
        ServerThread(ServeConfig(envs=("sokoban",), workers=1)) as b,
    ):
        envs = [RemoteEnv([a.url, b.url], "sokoban", timeout_s=30) for _ in range(2)]
        for env in envs:
            assert view(env.reset(5)[0]) == turns[0]
            obs, done, info = env.step(replies[0])
            assert view(obs, done, info, env.episode_reward()) == turns[1]
        on_a = next(env for env in envs if env.url == a.url)
        a.service.workers.kill(0, "killed by the test")
        wait_for(lambda: a.service.metrics.worker_restarts == 1)  # its sessions are lost now
        on_a.random_response(random.Random(0))  # a call that is no step: it restores the episode first
        assert on_a.url == b.url and getattr(on_a._standing, "restored", False)
        assert (on_a.state_key(), on_a.state_text(), on_a.distance_to_goal()) == stood[0]
        for env in envs:
            obs, done, info = env.step(replies[1])
            assert view(obs, done, info, env.episode_reward()) == turns[2]
            assert (env.state_key(), env.state_text(), env.distance_to_goal()) == stood[1]
            assert info.metrics.get(RESTORES_METRIC, 0) == (1 if env is on_a else 0)
            env.close()
        assert on_a.url == b.url


def test_a_restore_needs_a_kept_snapshot_and_a_live_server(tmp_path):
    """One URL keeps no snapshot (its loss is the error as before); two dead servers fail with both
    reasons on one line."""
    with served(tmp_path / "a.log") as (url_a, server_a):
        single = RemoteEnv(url_a, "sokoban", timeout_s=10)
        single.reset(1)
        assert single._kept is None
        pair = RemoteEnv([url_a, url_a], "sokoban", timeout_s=10)
        pair.reset(1)
        pair.step("<answer>Up</answer>")
        os.killpg(server_a.pid, signal.SIGKILL)
        server_a.wait(10)
        with pytest.raises(RemoteEnvError) as lost:
            single.step("<answer>Up</answer>")
        assert lost.value.lost and "ended" in str(lost.value)
        with pytest.raises(RemoteEnvError, match="no server restored it") as none:
            pair.step("<answer>Left</answer>")
        assert "\n" not in str(none.value) and str(none.value).count("cannot open a session") == 2


def test_the_kept_snapshot_is_read_as_hostile_input():
    env = build_env("sokoban")
    env.reset(3)
    good = env.snapshot()
    kept = KeptSnapshot(good, 3, fresh=True)
    kept.played("<answer>Up</answer>")
    env.step("<answer>Up</answer>")
    assert kept.snapshot() == env.snapshot()  # the server's own snapshot after the step, sealed here
    with pytest.raises(MalformedReply, match="digest"):
        KeptSnapshot({**good, "digest": "sha256:00"})
    with pytest.raises(MalformedReply, match="not of the episode just reset"):
        KeptSnapshot(good, 4, fresh=True)
    with pytest.raises(MalformedReply, match="not of the episode just reset"):
        KeptSnapshot(env.snapshot(), fresh=True)  # a reply already played
    with pytest.raises(MalformedReply, match="JSON object"):
        KeptSnapshot([good])
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(MalformedReply, match="nests deeper"):
        KeptSnapshot({**good, "state": deep})


def test_which_answers_mean_the_session_is_gone():
    assert session_gone(410, "SESSION_ERROR", "session closed")
    assert session_gone(500, "SESSION_ERROR", "session lost: the worker died (exit code -9); reset ...")
    assert session_gone(503, "CAPACITY_REACHED", "the server is shutting down: no new calls")
    assert session_gone(None, "SESSION_ERROR", "session closed after 600 s idle")
    assert not session_gone(500, "SESSION_ERROR", "the env failed on this step, episode ended: ...")
    assert not session_gone(422, "VALIDATION_ERROR", "snapshot refused: ...")
    assert not session_gone(504, "EXECUTION_ERROR", "the call ran past its deadline of 10 s, ...")
    assert restore_order(["a", "b", "c"], "b") == ["c", "a", "b"]
    assert restore_order(["a"], "a") == ["a"]
