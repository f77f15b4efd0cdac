"""Snapshots over the server: every registered env's session handed out (HTTP ``GET /snapshot``, WebSocket
``snapshot``) and continued on another server process (a reset with ``snapshot``) plays the same next
step as in process; hostile snapshots (huge, deep, forged, of another env, config or rules version, of
another session) are refused with their status and one line, a refused restore leaves the session's
episode as it was, and nothing in a snapshot is read as a path."""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from serve_support import Running, ServerThread, detail, post
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from vlm_envs import build_env, list_envs
from vlm_envs.imaging import lossless_png
from vlm_envs.serve.config import ServeConfig
from vlm_envs.snapshot import digest_of

NAMES = [spec.name for spec in list_envs()]
SEED = 5
PLAYED = 2  # replies played before the snapshot (fewer where the episode ends sooner)


@pytest.fixture(scope="module")
def other_server() -> Iterator[Running]:
    """A second server process tree (every env, one worker): where snapshots are continued."""
    with ServerThread(ServeConfig(workers=1)) as running:
        yield running


def in_process(name: str) -> tuple[list[str], int, dict[str, Any], Any, tuple]:
    """The replies (random, from ``SEED``), how many are played before the snapshot (up to
    :data:`PLAYED`, one fewer than the episode lasts), the snapshot then, the observation then, and the
    step after it."""
    env, rng = build_env(name), random.Random(SEED)
    env.reset(SEED)
    replies, done = [], False
    while not done and len(replies) <= PLAYED:
        replies.append(env.random_response(rng))
        _, done, _ = env.step(replies[-1])
    played = len(replies) - 1
    obs, _ = env.reset(SEED)
    for reply in replies[:played]:
        obs, _, _ = env.step(reply)
    snapshot = env.snapshot()
    after = env.step(replies[played])
    env.close()
    return replies, played, snapshot, obs, after


def same_step(body: dict[str, Any], obs: Any, done: bool, info: Any) -> None:
    """A served reply (``body``) equals the in-process step: text, PNG bytes, reward, end, metrics."""
    assert body["observation"]["text"] == obs.text
    assert [base64.b64decode(image) for image in body["observation"]["images"]] == [
        lossless_png(image) for image in obs.images
    ]
    assert (body["reward"], body["done"]) == (info.reward, done)
    assert body["metadata"]["metrics"] == json.loads(json.dumps(info.metrics))


def ws_call(ws: Any, kind: str, data: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    ws.send(json.dumps({"type": kind, "data": data or {}}))
    frame = json.loads(ws.recv(timeout=60))
    return frame["type"], frame["data"]


@pytest.mark.parametrize("name", NAMES)
def test_a_snapshot_continues_on_another_server_over_http_and_websocket(every_env_server, other_server, name):
    replies, played, snapshot, obs, (next_obs, next_done, next_info) = in_process(name)

    # HTTP: play on one server, hand the snapshot out, continue it on the other
    session = post(every_env_server, "/reset", {"env": name, "seed": SEED}).json()["metadata"]["session_id"]
    for reply in replies[:played]:
        assert post(every_env_server, "/step", {"session_id": session, "action": {"text": reply}}).ok
    taken = requests.get(every_env_server.url + "/snapshot", params={"session_id": session}, timeout=60)
    assert taken.status_code == 200 and taken.json() == snapshot  # the in-process env's very snapshot
    restored = post(other_server, "/reset", {"env": name, "snapshot": taken.json()})
    assert restored.status_code == 200, restored.text
    meta = restored.json()["metadata"]
    assert meta["restored"] is True and meta["step"] == played and restored.json()["done"] is False
    assert restored.json()["observation"]["text"] == obs.text
    action = {"session_id": meta["session_id"], "action": {"text": replies[played]}}
    stepped = post(other_server, "/step", action).json()
    same_step(stepped, next_obs, next_done, next_info)
    assert stepped["metadata"]["step"] == played + 1

    # the WebSocket: the same, each session its connection's
    with connect(every_env_server.ws_url, proxy=None) as first:
        ws_call(first, "reset", {"env": name, "seed": SEED})
        for reply in replies[:played]:
            assert ws_call(first, "step", {"text": reply})[0] == "observation"
        kind, ws_snapshot = ws_call(first, "snapshot")
    assert kind == "snapshot" and ws_snapshot == snapshot
    with connect(other_server.ws_url, proxy=None) as second:
        kind, body = ws_call(second, "reset", {"env": name, "snapshot": ws_snapshot})
        assert kind == "observation" and body["metadata"]["step"] == played, body
        kind, body = ws_call(second, "step", {"text": replies[played]})
        same_step(body, next_obs, next_done, next_info)


def sokoban_snapshot(running: Running) -> tuple[str, dict[str, Any]]:
    """An HTTP session of Sokoban one step in, and its snapshot."""
    session = post(running, "/reset", {"env": "sokoban", "seed": 3}).json()["metadata"]["session_id"]
    post(running, "/step", {"session_id": session, "action": {"text": "<answer>Up</answer>"}})
    answer = requests.get(running.url + "/snapshot", params={"session_id": session}, timeout=60)
    return session, answer.json()


def resealed(snapshot: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``snapshot`` forged: ``changes`` made and the digest computed again, as anyone can."""
    content = {key: value for key, value in {**snapshot, **changes}.items() if key != "digest"}
    return {**content, "digest": digest_of(content)}


def test_hostile_snapshots_are_refused_with_a_status_and_one_line(every_env_server):
    _, good = sokoban_snapshot(every_env_server)
    deep: Any = "x"
    for _ in range(40):
        deep = [deep]
    state = good["state"]
    cases = [
        ({**good, "digest": "sha256:" + "0" * 64}, "altered or truncated"),
        ({k: v for k, v in good.items() if k != "digest"}, "no 'digest'"),
        (resealed(good, state={**state, "replies": deep}), "nests deeper than 32"),
        (resealed(good, env="/etc/passwd"), "a snapshot of env '/etc/passwd', not of 'sokoban'"),
        (resealed(good, env="os:system"), "a snapshot of env 'os:system'"),
        (resealed(good, config={**good["config"], "num_boxes": 2}), "num_boxes=2 there, 1 here"),
        (resealed(good, rules_version="0"), "rules version '0'"),
        (resealed(good, state={**state, "seed": "3"}), "seed must be an int"),
        (resealed(good, state={**state, "replies": [1]}), "replies must all be strings"),
        (resealed(good, state={**state, "replies": ["<answer>Up</answer>"] * 500}), "does not replay"),
        ([good], "snapshot: Input should be a valid dictionary"),
    ]
    for snapshot, reason in cases:
        started = time.monotonic()
        answer = post(every_env_server, "/reset", {"env": "sokoban", "snapshot": snapshot})
        assert answer.status_code == 422 and reason in detail(answer), (reason, answer.text)
        assert time.monotonic() - started < 10
    # another config than the reset names (its digest intact), and a seed beside a snapshot
    answer = post(
        every_env_server, "/reset", {"env": "sokoban", "config": {"num_boxes": 2}, "snapshot": good}
    )
    assert answer.status_code == 422 and "num_boxes=1 there, 2 here" in detail(answer)
    answer = post(every_env_server, "/reset", {"env": "geo3k", "snapshot": good})
    assert answer.status_code == 422 and "not of 'geo3k'" in detail(answer)
    answer = post(every_env_server, "/reset", {"env": "sokoban", "seed": 3, "snapshot": good})
    assert answer.status_code == 422 and "give neither" in detail(answer)
    # too deep for the door (400) and too big for the body cap (413)
    deeper: Any = "x"
    for _ in range(70):
        deeper = [deeper]
    answer = post(every_env_server, "/reset", {"env": "sokoban", "snapshot": {**good, "state": deeper}})
    assert answer.status_code == 400 and "nested deeper" in detail(answer)
    huge = resealed(good, state={**state, "replies": ["x" * 1000] * 2000})
    answer = post(every_env_server, "/reset", {"env": "sokoban", "snapshot": huge})
    assert answer.status_code == 413 and "cap" in detail(answer)
    with connect(every_env_server.ws_url, proxy=None, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"env": "sokoban", "snapshot": huge}}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_nothing_in_a_snapshot_names_what_the_server_reads(every_env_server):
    """Jigsaw's ``image_dir`` (a folder it would read) in the replay's reset options is refused as a
    reset's options are, before anything is built or opened, whether the folder exists or not."""
    session = post(every_env_server, "/reset", {"env": "jigsaw", "seed": 1}).json()["metadata"]["session_id"]
    good = requests.get(every_env_server.url + "/snapshot", params={"session_id": session}, timeout=60).json()
    answers = set()
    for folder in ("/etc", "/no/such/folder"):
        forged = resealed(good, state={**good["state"], "options": {"image_dir": folder}})
        answer = post(every_env_server, "/reset", {"env": "jigsaw", "snapshot": forged})
        assert answer.status_code == 422 and "image_dir" in detail(answer)
        answers.add(detail(answer))
    assert len(answers) == 1  # the same line: nothing was looked up
    refused = post(
        every_env_server, "/reset", {"env": "jigsaw", "config": {"image_dir": "/etc"}, "snapshot": good}
    )
    assert refused.status_code == 422 and "image_dir" in detail(refused)


def test_a_session_is_its_clients_alone_and_a_refused_restore_leaves_it_as_it_was(every_env_server):
    session, good = sokoban_snapshot(every_env_server)
    with connect(every_env_server.ws_url, proxy=None) as ws:
        assert ws_call(ws, "snapshot")[1]["status"] == 409  # no episode yet
        ws_id = ws_call(ws, "reset", {"env": "sokoban", "seed": 3})[1]["metadata"]["session_id"]
        for session_id in (ws_id, "0" * 32):  # a WebSocket's session, a guessed id: no such HTTP session
            answer = requests.get(
                every_env_server.url + "/snapshot", params={"session_id": session_id}, timeout=60
            )
            assert answer.status_code == 404, answer.text
            restore = {"env": "sokoban", "snapshot": good, "session_id": session_id}
            assert post(every_env_server, "/reset", restore).status_code == 404
        kind, data = ws_call(ws, "snapshot", {"session_id": session})  # a WebSocket names no session
        assert kind == "error" and "takes no data" in data["message"] and data["status"] == 422
    missing = requests.get(every_env_server.url + "/snapshot", timeout=60)
    assert missing.status_code == 422 and "session_id" in detail(missing)
    # a refused restore into the session: its episode goes on where it stood
    forged = {**good, "digest": "sha256:" + "1" * 64}
    refused = post(every_env_server, "/reset", {"env": "sokoban", "snapshot": forged, "session_id": session})
    assert refused.status_code == 422
    again = requests.get(every_env_server.url + "/snapshot", params={"session_id": session}, timeout=60)
    assert again.json() == good
    post(every_env_server, "/close", {"session_id": session})
    gone = requests.get(every_env_server.url + "/snapshot", params={"session_id": session}, timeout=60)
    assert gone.status_code == 404
