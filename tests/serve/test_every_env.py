"""Every registered env played over the server, by HTTP and by WebSocket, equals the same seed played
in process: the same text, image bytes (and pixels), rewards, metrics and ends."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest
import requests

from vlm_envs import build_env, list_envs
from vlm_envs.imaging import lossless_png
from vlm_envs.plain_json import json_safe
from vlm_envs.protocol import Observation, StepInfo
from vlm_envs.remote import RemoteEnv

SEED = 11
TURNS = 4


def pixels(image: Any) -> tuple:
    """What makes two images the same picture: mode, size, pixels and palette."""
    palette = image.getpalette() if image.mode == "P" else None
    return image.mode, image.size, image.tobytes(), palette


def view(obs: Observation) -> dict[str, Any]:
    return {
        "text": obs.text,
        "role": obs.role,
        "image_slots": list(obs.image_slots),
        "metadata": json_safe(obs.metadata),
        "pixels": [pixels(image) for image in obs.images],
    }


def outcome(info: StepInfo, done: bool, episode_reward: float) -> dict[str, Any]:
    return {
        "reward": info.reward,
        "done": done,
        "terminated": info.terminated,
        "truncated": info.truncated,
        "metrics": json_safe(info.metrics),
        "info": json_safe(info.info),
        "episode_reward": episode_reward,
    }


def play_in_process(name: str) -> tuple[list[str], list[dict], list[list[bytes]], dict]:
    """The replies played (the oracle's where there is one), what each turn showed, its PNGs and
    the reset info."""
    env = build_env(name)
    obs, reset_info = env.reset(SEED)
    turns, pngs, replies = [view(obs)], [[lossless_png(i) for i in obs.images]], []
    rng = random.Random(SEED)
    for _ in range(TURNS):
        reply = env.oracle_response() or env.random_response(rng)
        obs, done, info = env.step(reply)
        replies.append(reply)
        turns.append({**view(obs), **outcome(info, done, env.episode_reward())})
        pngs.append([lossless_png(i) for i in obs.images])
        if done:
            break
    env.close()
    return replies, turns, pngs, json_safe(reset_info)


NAMES = [spec.name for spec in list_envs()]


@pytest.mark.parametrize("name", NAMES)
def test_an_env_over_websocket_and_http_equals_it_in_process(every_env_server, name):
    replies, expected, expected_png, expected_info = play_in_process(name)

    remote = RemoteEnv(every_env_server.url, name)  # the WebSocket session
    obs, reset_info = remote.reset(SEED)
    assert remote.session["session_id"] and view(obs) == expected[0] and reset_info == expected_info
    for reply, want in zip(replies, expected[1:], strict=True):
        obs, done, info = remote.step(reply)
        assert {**view(obs), **outcome(info, done, remote.episode_reward())} == want
    remote.close()

    def post(path: str, body: dict) -> dict:
        answer = requests.post(every_env_server.url + path, json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()

    first = post("/reset", {"env": name, "seed": SEED})
    session_id = first["metadata"]["session_id"]
    bodies = [first] + [post("/step", {"session_id": session_id, "action": {"text": r}}) for r in replies]
    for body, want, pngs in zip(bodies, expected, expected_png, strict=True):
        got = body["observation"]
        assert got["text"] == want["text"] and got["role"] == want["role"]
        assert got["image_slots"] == want["image_slots"] and got["metadata"] == body["metadata"]
        assert body["metadata"]["observation_metadata"] == want["metadata"]  # the env's own
        assert [base64.b64decode(data) for data in got["images"]] == pngs  # the very PNG bytes
        if "reward" in want:
            meta = body["metadata"]
            assert body["reward"] == want["reward"] and body["done"] == want["done"]
            assert meta["metrics"] == want["metrics"] and meta["info"] == want["info"]
            assert meta["episode_reward"] == want["episode_reward"]
            assert meta["status"] == (
                "terminated" if want["terminated"] else "truncated" if want["truncated"] else "running"
            )
    post("/close", {"session_id": session_id})


def test_the_suite_covers_every_registered_env():
    assert {"sokoban", "geo3k"} <= set(NAMES) and len(NAMES) >= 7
