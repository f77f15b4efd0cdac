"""Where an episode stands, over the server: every registered env, played by its oracle and by a seeded
random player, gives over a ``RemoteEnv`` (WebSocket) and over HTTP the same ``state_key``, ``state_text``
and ``distance_to_goal`` at every turn as the same seed in process. A served env whose signal method
raises or gives a wrong type answers null and the reason (``signal_errors``); its session and the server
go on, and ``RemoteEnv`` raises that reason where the method is called, as the env raises in process."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests
from serve_support import Running, ServerThread, post

from vlm_envs import Env, build_env, list_envs
from vlm_envs.remote import RemoteEnv, RemoteEnvError
from vlm_envs.serve.config import ServeConfig
from vlm_envs.serve.env_calls import signal_fields
from vlm_envs.serve.wire import MAX_STATE_KEY_CHARS, MAX_STATE_TEXT_CHARS

NAMES = [spec.name for spec in list_envs()]
SEED = 7
#: The most replies a random player plays (the oracle plays to the end: six turns at most here).
RANDOM_TURNS = 10
KEY_RAISES, DISTANCE_AS_TEXT = "toyenvs.broken:KeyRaises", "toyenvs.broken:DistanceAsText"

Signals = tuple[Any, Any, Any]


def signals(env: Env) -> Signals:
    return env.state_key(), env.state_text(), env.distance_to_goal()


def from_body(body: dict[str, Any]) -> Signals:
    meta = body["metadata"]
    assert body["observation"]["metadata"] == meta and meta["signal_errors"] == {}
    return meta["state_key"], meta["state_text"], meta["distance_to_goal"]


def play(env: Env, player: str, replies: list[str] | None = None) -> tuple[list[str], list[Signals]]:
    """One episode from :data:`SEED`: the oracle's replies, or a random player's drawn from a generator
    seeded with it (``replies``: these instead); the replies and the signals after the reset and each."""
    env.reset(SEED)
    rng, played, seen, done = random.Random(SEED), [], [signals(env)], False
    while not done and len(played) < (len(replies) if replies is not None else 200):
        if replies is not None:
            reply = replies[len(played)]
        elif player == "oracle":
            reply = env.oracle_response()
        else:
            reply = env.random_response(rng) if len(played) < RANDOM_TURNS else None
        if reply is None:
            break
        _, done, _ = env.step(reply)
        played.append(reply)
        seen.append(signals(env))
    return played, seen


@pytest.mark.parametrize("player", ["oracle", "random"])
@pytest.mark.parametrize("name", NAMES)
def test_a_served_episode_stands_where_the_in_process_one_does(every_env_server, name, player):
    local = build_env(name)
    replies, expected = play(local, player)
    assert replies and expected[0] != (None, None, None), f"{name} says where it stands"
    local.close()

    remote = RemoteEnv(every_env_server.url, name)
    assert signals(remote) == (None, None, None)  # before a reset, as in process
    # The random player draws over the wire (the server's random_response); the oracle's replies replay.
    played, seen = play(remote, player, None if player == "random" else replies)
    remote.close()
    assert played == replies and seen == expected

    first = post(every_env_server, "/reset", {"env": name, "seed": SEED}).json()
    session_id = first["metadata"]["session_id"]
    bodies = [first] + [
        post(every_env_server, "/step", {"session_id": session_id, "action": {"text": reply}}).json()
        for reply in replies
    ]
    post(every_env_server, "/close", {"session_id": session_id})
    assert [from_body(body) for body in bodies] == expected


@pytest.fixture(scope="module")
def broken_server() -> Iterator[Running]:
    """Toy envs whose signal methods fail, and one that works, on one worker."""
    with ServerThread(ServeConfig(envs=(KEY_RAISES, DISTANCE_AS_TEXT, "sokoban"), workers=1)) as running:
        yield running


@pytest.mark.parametrize(
    "env, failed, reason",
    [
        (KEY_RAISES, "state_key", "state_key() raised RuntimeError: the key store is down"),
        (
            DISTANCE_AS_TEXT,
            "distance_to_goal",
            "distance_to_goal() gave a str value: Input should be a valid integer",
        ),
    ],
)
def test_a_failing_signal_answers_null_and_why_and_the_episode_goes_on(broken_server, env, failed, reason):
    local = build_env(env)
    local.reset(SEED)
    body = post(broken_server, "/reset", {"env": env, "seed": SEED}).json()
    meta = body["metadata"]
    assert meta["signal_errors"] == {failed: reason} and meta[failed] is None
    assert meta["state_text"] == local.state_text()  # the others as the env gives them

    remote = RemoteEnv(broken_server.url, env)
    remote.reset(SEED)
    with pytest.raises(RemoteEnvError) as caught:
        getattr(remote, failed)()
    assert str(caught.value) == f"{broken_server.url}: the served env failed: {reason}"
    assert remote.state_text() == local.state_text()
    obs, done, _ = remote.step(local.oracle_response())  # the session goes on, and so does the episode
    assert done and obs.text == "Correct." and remote.episode_reward() == 1.0
    with pytest.raises(RemoteEnvError, match=failed):
        getattr(remote, failed)()
    remote.close()

    other = RemoteEnv(broken_server.url, "sokoban")  # the server and its worker go on too
    other.reset(SEED)
    assert other.state_key() is not None and other.distance_to_goal() is not None
    other.close()
    assert broken_server.service.metrics.worker_restarts == 0


class Stub:
    """An env's three signal methods giving what ``values`` names (an exception is raised)."""

    def __init__(self, **values: Any) -> None:
        self.values = {"state_key": "k", "state_text": "t", "distance_to_goal": 3, **values}

    def __getattr__(self, name: str) -> Any:
        value = self.values[name]
        if isinstance(value, BaseException):
            raise value
        return lambda: value


@pytest.mark.parametrize(
    "given, failed, reason",
    [
        ({}, None, None),
        ({"state_key": None, "state_text": None, "distance_to_goal": None}, None, None),
        ({"distance_to_goal": -1}, None, None),
        (
            {"distance_to_goal": -2},
            "distance_to_goal",
            "gave a int value: Input should be greater than or equal to -1",
        ),
        (
            {"distance_to_goal": True},
            "distance_to_goal",
            "gave a bool value: Input should be a valid integer",
        ),
        (
            {"distance_to_goal": np.int64(2)},
            "distance_to_goal",
            "gave a int64 value: Input should be a valid integer",
        ),
        ({"distance_to_goal": 1 << 63}, "distance_to_goal", "gave a int value: Input should be less than"),
        (
            {"distance_to_goal": 2.0},
            "distance_to_goal",
            "gave a float value: Input should be a valid integer",
        ),
        ({"state_key": b"k"}, "state_key", "gave a bytes value: Input should be a valid string"),
        (
            {"state_key": "k" * (MAX_STATE_KEY_CHARS + 1)},
            "state_key",
            "gave a str value: String should have at most",
        ),
        (
            {"state_text": "t" * (MAX_STATE_TEXT_CHARS + 1)},
            "state_text",
            "gave a str value: String should have at most",
        ),
        ({"state_text": ValueError("x\n" * 400)}, "state_text", "state_text() raised ValueError: x x x"),
    ],
)
def test_the_signals_a_reply_carries_are_checked(given, failed, reason):
    fields = signal_fields(Stub(**given))  # type: ignore[arg-type]
    errors = fields.pop("signal_errors")
    expected = {"state_key": "k", "state_text": "t", "distance_to_goal": 3, **given}
    if failed is None:
        assert errors == {} and fields == expected
        return
    assert list(errors) == [failed] and reason in errors[failed] and len(errors[failed]) <= 300
    assert fields == {**expected, failed: None}


def test_a_server_reply_says_where_it_stands_in_the_openenv_clients_view(every_env_server):
    """OpenEnv's own client keeps the signals in the observation's metadata (openenv-core 0.3.0 keeps
    nothing else of a reply's metadata)."""
    from openenv.core import GenericEnvClient

    local = build_env("sokoban")
    local.reset(SEED)
    with GenericEnvClient(base_url=every_env_server.url).sync() as client:
        meta = client.reset(env="sokoban", seed=SEED).observation["metadata"]
    assert (meta["state_key"], meta["state_text"], meta["distance_to_goal"]) == signals(local)
    schema = requests.get(every_env_server.url + "/schema", timeout=10).json()
    assert "state_key" not in schema["observation"]["properties"]  # metadata, not a field of its own
