"""Point 3 of issue 39: a dead worker fails only its own sessions, idle sessions close, the session
cap refuses at once, and bad input (malformed JSON, big bodies, unknown sessions or envs, a step
after the end) gets a 4xx with one line."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests
from serve_support import SLOW_ENV, ServerThread, detail, open_session, post, step, wait_for
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from vlm_envs.protocol import EpisodeFinishedError
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.serve.config import ServeConfig


@pytest.fixture(scope="module")
def slow():
    config = ServeConfig(envs=(SLOW_ENV, "sokoban"), workers=2, max_sessions=6, max_body_bytes=4096)
    with ServerThread(config) as running:
        yield running


def test_a_worker_killed_mid_step_fails_only_its_sessions_and_is_restarted(slow):
    service = slow.service
    a, b = open_session(slow), open_session(slow)
    worker_a = service.sessions.get(a).worker
    assert service.sessions.get(b).worker != worker_a  # least loaded: one session on each worker
    pid = service.workers.pids()[worker_a]
    answers = []
    thread = threading.Thread(target=lambda: answers.append(step(slow, a, "sleep 20")))
    thread.start()
    wait_for(lambda: service.in_flight >= 1)
    time.sleep(0.3)  # the step is inside the env now
    os.kill(pid, signal.SIGKILL)
    thread.join(30)
    assert answers[0].status_code == 500 and "exit code -9" in detail(answers[0])
    later = step(slow, a)
    assert later.status_code == 410 and "exit code -9" in detail(later)
    assert step(slow, b).status_code == 200  # the other worker's session goes on
    wait_for(lambda: service.workers.pids()[worker_a] not in (None, pid))
    assert service.metrics.worker_restarts >= 1
    fresh = [open_session(slow) for _ in range(2)]
    assert all(step(slow, s).status_code == 200 for s in fresh)
    for s in (b, *fresh):
        post(slow, "/close", {"session_id": s})


def test_a_websocket_session_of_a_killed_worker_hears_why_then_resets(slow):
    remote = RemoteEnv(slow.url, SLOW_ENV)
    remote.reset(1)
    session = slow.service.sessions.get(remote.session["session_id"])
    os.kill(slow.service.workers.pids()[session.worker], signal.SIGKILL)
    wait_for(lambda: session.lost is not None)
    with pytest.raises(RemoteEnvError, match=r"session lost.*exit code -9") as err:
        remote.step("go")
    assert err.value.status == 500
    wait_for(lambda: all(slow.service.workers.pids()))
    obs, _ = remote.reset(2)  # the same connection plays on a live worker
    assert obs.text == "start 2" and remote.step("go")[0].text == "step 1"
    remote.close()


def test_past_max_sessions_a_new_session_is_refused_at_once(slow):
    held = [open_session(slow) for _ in range(6 - len(slow.service.sessions))]
    started = time.monotonic()
    refused = post(slow, "/reset", {"env": SLOW_ENV})
    assert refused.status_code == 503 and "maximum of 6 sessions" in detail(refused)
    assert slow.service.metrics.refusals["capacity"] == 1
    with connect(slow.ws_url) as ws:
        frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error" and frame["data"]["code"] == "CAPACITY_REACHED"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 1013
    assert time.monotonic() - started < 5
    post(slow, "/close", {"session_id": held.pop()})
    held.append(open_session(slow))  # a freed slot is taken again
    for s in held:
        post(slow, "/close", {"session_id": s})


def test_malformed_json_is_a_400_over_http_and_an_error_frame_over_websocket(slow):
    for path in ("/reset", "/step", "/close"):
        answer = post(slow, path, data=b'{"env": "sokoban",')
        assert answer.status_code == 400 and detail(answer).startswith("malformed JSON")
    answer = post(slow, "/step", data=b"[1, 2]")
    assert answer.status_code == 400 and "expected a JSON object" in detail(answer)
    with connect(slow.ws_url) as ws:
        ws.send("{nope")
        frame = json.loads(ws.recv(timeout=10))
        assert frame["data"]["code"] == "INVALID_JSON" and frame["data"]["status"] == 400
        ws.send(json.dumps({"type": "dance"}))
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "UNKNOWN_TYPE"
        ws.send(json.dumps({"type": "reset", "data": {"env": "sokoban", "seed": -1}}))
        assert json.loads(ws.recv(timeout=10))["data"]["status"] == 422
        ws.send(json.dumps({"type": "reset", "data": {"env": "sokoban", "seed": 1}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"  # the session goes on


def test_bodies_over_the_cap_are_refused(slow):
    session_id = open_session(slow)
    answer = step(slow, session_id, "x" * 10_000)
    assert answer.status_code == 413 and "cap of 4096 bytes" in detail(answer)
    with connect(slow.ws_url) as ws:
        ws.send(json.dumps({"type": "step", "data": {"text": "x" * 10_000}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 1009  # message too big
    assert step(slow, session_id).status_code == 200
    post(slow, "/close", {"session_id": session_id})


def test_unknown_sessions_and_envs_get_a_4xx_naming_what_is_known(slow):
    answer = step(slow, "0" * 32)
    assert answer.status_code == 404 and "unknown session" in detail(answer)
    state = requests.get(slow.url + "/state", params={"session_id": "abc"}, timeout=10)
    assert state.status_code == 404
    answer = post(slow, "/reset", {"env": "chess"})
    assert answer.status_code == 404 and "unknown env 'chess'" in detail(answer)
    assert "sokoban" in detail(answer) and SLOW_ENV in detail(answer)
    answer = post(slow, "/reset", {"seed": 1})
    assert answer.status_code == 422 and "name the env" in detail(answer)
    answer = post(slow, "/reset", {"env": "sokoban", "config": {"grid_size": "huge"}})
    assert answer.status_code == 422 and "env 'sokoban' rejects its config: grid_size" in detail(answer)
    answer = post(slow, "/reset", {"env": "sokoban", "config": {"grid_sise": [6, 6]}})
    assert answer.status_code == 422
    assert "unknown key 'grid_sise' (did you mean 'grid_size'?)" in detail(answer)
    assert "valid keys: " in detail(answer) and "max_turns" in detail(answer)
    assert "errors.pydantic" not in detail(answer)
    with pytest.raises(RemoteEnvError, match="unknown env 'chess'") as err:
        RemoteEnv(slow.url, "chess").reset(0)
    assert err.value.status == 404
    remote = RemoteEnv(slow.url, SLOW_ENV)
    remote.reset(0)
    answer = step(slow, remote.session["session_id"])  # a WebSocket's session is not for HTTP calls
    assert answer.status_code == 404 and "played on it" in detail(answer)
    remote.close()


def test_a_step_after_done_is_a_409(slow):
    session_id = open_session(slow)
    assert step(slow, session_id).json()["done"] is False
    assert step(slow, session_id).json()["done"] is True
    answer = step(slow, session_id)
    assert answer.status_code == 409 and "episode is done" in detail(answer)
    remote = RemoteEnv(slow.url, SLOW_ENV)
    remote.reset(0)
    remote.step("a")
    assert remote.step("b")[1] is True
    with pytest.raises(EpisodeFinishedError):
        remote.step("c")
    remote.close()
    post(slow, "/close", {"session_id": session_id})


def test_idle_sessions_are_closed():
    with ServerThread(ServeConfig(envs=(SLOW_ENV,), workers=1, idle_timeout_s=0.5)) as running:
        session_id = open_session(running)
        with connect(running.ws_url) as ws:
            ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
            assert json.loads(ws.recv(timeout=10))["type"] == "observation"
            frame = json.loads(ws.recv(timeout=10))  # nothing sent for a while: the server closes
            assert frame["type"] == "error" and "idle" in frame["data"]["message"]
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1000
        answer = step(running, session_id)
        assert answer.status_code == 410 and "idle" in detail(answer)
        assert len(running.service.sessions) == 0


def test_workers_that_cannot_start_stop_being_restarted_and_calls_say_why():
    import asyncio

    from slow_env import worker_that_cannot_start

    from vlm_envs.serve.pool import START_ATTEMPTS, EnvWorkers, WorkerDied

    async def main():
        pool = EnvWorkers(1, {"x": "x"}, target=worker_that_cannot_start)
        pool.start(asyncio.get_running_loop())
        for _ in range(600):
            if pool.broken:
                break
            await asyncio.sleep(0.05)
        assert pool.broken and "exit code 3" in pool.broken and pool._failed_starts == START_ATTEMPTS
        with pytest.raises(WorkerDied, match="cannot start"):
            await pool.call(0, pool.generation(0), "state", "s", None)
        await pool.close()

    asyncio.run(main())


def test_deeply_nested_json_is_a_400_and_the_server_goes_on(slow):
    answer = post(slow, "/reset", data=b"[" * 2000 + b"]" * 2000)
    assert answer.status_code == 400 and detail(answer).startswith("malformed JSON")
    nested = '{"env": "sokoban", "config": {"a": ' + "[" * 1500 + "]" * 1500 + "}}"
    answer = post(slow, "/reset", data=nested.encode())
    assert answer.status_code in (400, 422) and detail(answer)
    assert requests.get(slow.url + "/health", timeout=10).json()["status"] == "healthy"


def test_calls_queued_behind_slow_ones_are_not_timed_while_their_worker_answers():
    """Three 1.2 s steps on one worker take 3.6 s in all, past the 2 s call timeout: each answers, and
    the worker (with every session on it) lives, since it answered something every 1.2 s."""
    config = ServeConfig(envs=(SLOW_ENV,), workers=1, call_deadline_s=1.8, call_timeout_s=2.0)
    with ServerThread(config) as running:
        sessions = [open_session(running) for _ in range(3)]
        pid = running.service.workers.pids()[0]
        answers: list[int] = []
        threads = [
            threading.Thread(target=lambda s=s: answers.append(step(running, s, "sleep 1.2").status_code))
            for s in sessions
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert answers == [200, 200, 200]
        assert running.service.workers.pids()[0] == pid


def test_a_step_no_signal_interrupts_kills_its_worker_at_the_call_timeout():
    config = ServeConfig(envs=(SLOW_ENV,), workers=1, call_deadline_s=0.5, call_timeout_s=2.0)
    with ServerThread(config) as running:
        session_id = open_session(running)
        started = time.monotonic()
        answer = step(running, session_id, "block 60")  # the deadline's signal stays blocked
        assert answer.status_code == 500 and "answered nothing for 2 s" in detail(answer)
        assert time.monotonic() - started < 15
        running.service.workers.call_timeout_s = 120.0
        wait_for(lambda: all(running.service.workers.pids()))
        assert step(running, open_session(running)).status_code == 200  # a new worker serves
